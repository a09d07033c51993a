// Package identity makes holder instance ids (promise P5): in memory, from
// fresh randomness mixed with both clocks and the process id, never read
// from disk, the machine id or the hostname.
package identity

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"os"
	"time"
)

var instanceEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// New returns a fresh holder instance id (promise P5): 26
// lowercase base32 characters hashed from 16 random bytes, the wall and
// monotonic clocks in nanoseconds and the process id. It is made in memory,
// never read from disk, the machine id or the hostname, so a forked or
// restored process that makes its own differs from its parent even if their
// random generators were cloned along with them.
func New() string {
	var b [16 + 8 + 8 + 8]byte
	_, _ = rand.Read(b[:16]) // crypto/rand.Read never fails (Go ≥ 1.24)
	now := time.Now()
	binary.LittleEndian.PutUint64(b[16:], uint64(now.UnixNano()))
	binary.LittleEndian.PutUint64(b[24:], uint64(time.Since(processStart)))
	binary.LittleEndian.PutUint64(b[32:], uint64(os.Getpid()))
	sum := sha256.Sum256(b[:])
	return instanceEncoding.EncodeToString(sum[:16])
}

var processStart = time.Now()
