package serve

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVisible(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, plain, html string
	}{
		{"Plain", "nightly-billing", "nightly-billing", "nightly-billing"},
		{"Markup", `<script>alert("x")</script>`, `<script>alert("x")</script>`, `&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;`},
		{"BidiOverride", "ab\u202Ecd", "ab[U+202E]cd", `ab<span class="esc" title="invisible or format character">[U+202E]</span>cd`},
		{"BidiIsolate", "\u2066x\u2069", "[U+2066]x[U+2069]", `<span class="esc" title="invisible or format character">[U+2066]</span>x<span class="esc" title="invisible or format character">[U+2069]</span>`},
		{"ZeroWidth", "a\u200Bb\u200Dc\uFEFF", "a[U+200B]b[U+200D]c[U+FEFF]", ""},
		{"NoBreakSpace", "a\u00A0b", "a[U+00A0]b", ""},
		{"Control", "a\nb\x7f", "a[U+000A]b[U+007F]", ""},
		{"VariationSelector", "a\uFE0Fb", "a[U+FE0F]b", ""},
		{"HangulFiller", "a\u3164b", "a[U+3164]b", ""},
		{"InvalidUTF8", "a\xffb", "a[0xFF]b", ""},
		{"LettersOfOtherScripts", "ночь-批处理", "ночь-批处理", "ночь-批处理"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.plain, oneLine(tc.in))
			if tc.html != "" {
				require.Equal(t, tc.html, string(visibleHTML(tc.in)))
			}
		})
	}
}

func TestShorten(t *testing.T) {
	t.Parallel()
	require.Equal(t, "abc", shorten("abc", 3))
	require.Equal(t, "ab…", shorten("abcd", 3))
	require.Equal(t, "ночь…", shorten("ночь-批处理", 5))
}
