package hub

import (
	"bytes"
	"strings"

	"golang.org/x/net/html"
)

// HTMLText reduces HTML to the text a reader sees: scripts and styles
// dropped, block elements and table rows on lines of their own, table
// cells separated by " | ", list items marked "- ", runs of white space
// made one. It never fails: what does not parse is taken as text.
func HTMLText(b []byte) string {
	z := html.NewTokenizer(bytes.NewReader(b))
	var out strings.Builder
	skip := 0     // inside script or style
	cell := false // a cell began on this row
	space := false
	newline := func() {
		if s := out.String(); len(s) > 0 && !strings.HasSuffix(s, "\n") {
			out.WriteByte('\n')
		}
		space, cell = false, false
	}
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return strings.TrimSpace(out.String())
		case html.TextToken:
			if skip > 0 {
				continue
			}
			raw := z.Text()
			words := strings.Fields(string(raw))
			if len(words) > 0 {
				if (space || isSpace(raw[0])) && out.Len() > 0 && !endsSpace(&out) {
					out.WriteByte(' ')
				}
				out.WriteString(strings.Join(words, " "))
			}
			space = len(raw) > 0 && isSpace(raw[len(raw)-1])
		case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			tag := string(name)
			switch tag {
			case "script", "style", "head", "title":
				if tt == html.StartTagToken {
					skip++
				} else if tt == html.EndTagToken && skip > 0 {
					skip--
				}
			case "br", "p", "div", "tr", "table", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "section", "article", "hr", "thead", "tbody":
				newline()
			case "li":
				newline()
				if tt == html.StartTagToken {
					out.WriteString("- ")
				}
			case "td", "th":
				if tt == html.StartTagToken {
					if cell {
						out.WriteString(" | ")
					}
					cell, space = true, false
				}
			}
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' }

func endsSpace(b *strings.Builder) bool {
	s := b.String()
	return len(s) > 0 && isSpace(s[len(s)-1])
}
