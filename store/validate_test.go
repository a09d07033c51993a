package store_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/store"
)

func TestValidateText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		s    string
		want string // part of the error; empty: accepted
	}{
		{"Plain", "nightly-billing", ""},
		{"Unicode", "café/ünïcode:名前🔒", ""},
		{"Arabic", "مرحبا", ""},
		{"Hebrew", "שלום", ""},
		{"NoBreakSpace", "a\u00a0b", ""},
		{"IdeographicSpace", "a\u3000b", ""},
		{"EmojiSequence", "👍🏽", ""},
		{"Empty", "", "lease name is empty"},
		{"TooLong", strings.Repeat("n", store.MaxNameLen+1), "is 256 bytes long"},
		{"NotUTF8", "a\xffb", "is not valid UTF-8"},
		{"Tab", "a\tb", `lease name "a\tb" contains the control character U+0009`},
		{"Escape", "job\x1b[2J", "control character U+001B"},
		{"Delete", "a\x7fb", "control character U+007F"},
		{"C1", "a\u009bb", "control character U+009B"},
		{"ArabicLetterMark", "a\u061cb", `"a\u061cb" contains the bidirectional control U+061C`},
		{"LeftToRightMark", "a\u200eb", "bidirectional control U+200E"},
		{"RightToLeftMark", "a\u200fb", "bidirectional control U+200F"},
		{"LeftToRightEmbedding", "a\u202ab", "bidirectional control U+202A"},
		{"PopDirectionalFormatting", "a\u202cb", "bidirectional control U+202C"},
		{"RightToLeftOverride", "job\u202egpj.exe", `"job\u202egpj.exe" contains the bidirectional control U+202E; use visible characters only`},
		{"LeftToRightIsolate", "a\u2066b", "bidirectional control U+2066"},
		{"PopDirectionalIsolate", "a\u2069b", "bidirectional control U+2069"},
		{"ZeroWidthSpace", "jo\u200bb", `"jo\u200bb" contains the invisible format character U+200B`},
		{"ZeroWidthNonJoiner", "a\u200cb", "invisible format character U+200C"},
		{"ZeroWidthJoiner", "a\u200db", "invisible format character U+200D"},
		{"WordJoiner", "a\u2060b", "invisible format character U+2060"},
		{"ByteOrderMark", "\ufeffjob", "invisible format character U+FEFF"},
		{"SoftHyphen", "jo\u00adb", "invisible format character U+00AD"},
		{"TagCharacter", "a\U000E0041b", "invisible format character U+E0041"},
		{"LineSeparator", "a\u2028b", "line separator U+2028"},
		{"ParagraphSeparator", "a\u2029b", "line separator U+2029"},
		{"FirstBadRuneNamed", "\u200bx\u202e", "U+200B"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := store.ValidateName(tc.s)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, store.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
			for _, r := range err.Error() {
				require.False(t, r < 0x20 || (r >= 0x200b && r <= 0x206f) || r == 0xfeff || r == 0x061c,
					"the error shows %U raw: %q", r, err.Error())
			}
		})
	}
}

func TestValidateTextNamesWhat(t *testing.T) {
	t.Parallel()
	err := store.ValidateText("holder label", "ops\u202e", store.MaxLabelLen)
	require.ErrorIs(t, err, store.ErrInvalid)
	require.ErrorContains(t, err, `holder label "ops\u202e" contains the bidirectional control U+202E`)
}

func TestValidatePayload(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		s    string
		want string // part of the error; empty: accepted
	}{
		{"Empty", "", ""},
		{"Address", "10.0.0.7:8443", ""},
		{"MaxLen", strings.Repeat("p", store.MaxPayloadLen), ""},
		{"TooLong", strings.Repeat("p", store.MaxPayloadLen+1), "payload is 1025 bytes long; the maximum is 1024"},
		{"NotUTF8", "a\xffb", `payload "a\xffb" is not valid UTF-8`},
		{"NUL", "a\x00b", "control character U+0000"},
		{"Newline", "a\nb", "control character U+000A"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := store.ValidatePayload(tc.s)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, store.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
