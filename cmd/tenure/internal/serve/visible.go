package serve

import (
	"fmt"
	"html/template"
	"strings"
	"unicode"
	"unicode/utf8"
)

// invisible reports whether r would be rendered raw as nothing, as
// something that looks like another character, or as a reordering of the
// text around it: control and format characters (the bidi overrides and
// isolates, zero-width spaces and joiners, the BOM), line and paragraph
// separators, spaces other than U+0020, variation selectors, other
// default-ignorable code points, private-use and surrogate code points.
func invisible(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Co, unicode.Cs,
		unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point) ||
		(r != ' ' && unicode.Is(unicode.Zs, r))
}

// piece is a run of s: text to show as it is, or one escaped character.
type piece struct {
	text    string
	escaped bool
}

// pieces splits s into printable runs and escapes: [U+202E] for an
// invisible character, [0xFF] for a byte that is not UTF-8.
func pieces(s string) []piece {
	var out []piece
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var esc string
		switch {
		case r == utf8.RuneError && size == 1:
			esc = fmt.Sprintf("[0x%02X]", s[i])
		case invisible(r):
			esc = fmt.Sprintf("[%U]", r)
		}
		if esc != "" {
			if start < i {
				out = append(out, piece{text: s[start:i]})
			}
			out = append(out, piece{text: esc, escaped: true})
			start = i + size
		}
		i += size
	}
	if start < len(s) {
		out = append(out, piece{text: s[start:]})
	}
	return out
}

// oneLine returns s with every invisible character or invalid byte written
// as a visible escape, for plain text (SVG text, titles, /healthz).
func oneLine(s string) string {
	var b strings.Builder
	for _, p := range pieces(s) {
		b.WriteString(p.text)
	}
	return b.String()
}

// visibleHTML returns s as HTML text: escaped, with each invisible
// character or invalid byte shown as a marked escape.
func visibleHTML(s string) template.HTML {
	var b strings.Builder
	for _, p := range pieces(s) {
		if p.escaped {
			b.WriteString(`<span class="esc" title="invisible or format character">`)
			b.WriteString(template.HTMLEscapeString(p.text))
			b.WriteString(`</span>`)
			continue
		}
		b.WriteString(template.HTMLEscapeString(p.text))
	}
	return template.HTML(b.String()) //nolint:gosec // every piece is escaped above
}
