package sqlitestore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// DefaultPath returns the conventional location of the lease database for
// the current user: $XDG_STATE_HOME/tenure/tenure.db, or
// $HOME/.local/state/tenure/tenure.db when XDG_STATE_HOME is unset or not
// absolute (as the XDG Base Directory specification asks). It only computes
// the path; [Open] creates what is missing.
func DefaultPath() (string, error) {
	if dir := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "tenure", "tenure.db"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("sqlitestore: no default database path: %w; set XDG_STATE_HOME or HOME, or pass a path", err)
	}
	if !filepath.IsAbs(home) {
		return "", errors.New("sqlitestore: no default database path: HOME is not an absolute path; set XDG_STATE_HOME or HOME, or pass a path")
	}
	return filepath.Join(home, ".local", "state", "tenure", "tenure.db"), nil
}
