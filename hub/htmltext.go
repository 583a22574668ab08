package hub

import (
	"html"
	"strings"
)

// HTMLText reduces HTML to the text a reader sees: scripts and styles
// dropped, block elements and table rows on lines of their own, table
// cells separated by " | ", list items marked "- ", runs of white space
// made one. It never fails: what does not parse is taken as text.
//
// It reads tags and text by HTML's tokenizing rules (the HTML Standard,
// "Tokenization", for what a reduction to text needs: tags and their
// quoted attributes, comments, raw text elements) rather than through
// golang.org/x/net/html: that package builds its table of 2,231 entities
// at init, in every process of this binary, where it was a tenth of a
// warm `replhub exec`'s page faults. Package html's table is built at its
// first use.
func HTMLText(b []byte) string {
	z := htmlTokenizer{s: string(b)}
	return reduceHTML(z.next)
}

// reduceHTML is HTMLText over the tokens next returns, up to htmlEOF.
func reduceHTML(next func() (htmlToken, string)) string {
	var out strings.Builder
	skip := 0     // inside script, style or title
	cell := false // a cell began on this row
	space := false
	newline := func() {
		if s := out.String(); len(s) > 0 && !strings.HasSuffix(s, "\n") {
			out.WriteByte('\n')
		}
		space, cell = false, false
	}
	for {
		tt, v := next()
		switch tt {
		case htmlEOF:
			return strings.ToValidUTF8(strings.TrimSpace(out.String()), "\uFFFD")
		case htmlText:
			if skip > 0 {
				continue
			}
			words := strings.Fields(v)
			if len(words) > 0 {
				if (space || isSpace(v[0])) && out.Len() > 0 && !endsSpace(&out) {
					out.WriteByte(' ')
				}
				out.WriteString(strings.Join(words, " "))
			}
			space = len(v) > 0 && isSpace(v[len(v)-1])
		case htmlStart, htmlEnd, htmlSelfClosing:
			// A head is not skipped as a whole, only what it holds that
			// a page does not show (title, script, style): a head left
			// open would hide the body.
			switch v {
			case "script", "style", "title":
				if tt == htmlStart {
					skip++
				} else if tt == htmlEnd && skip > 0 {
					skip--
				}
			case "br", "p", "div", "tr", "table", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "section", "article", "hr", "thead", "tbody":
				newline()
			case "li":
				newline()
				if tt == htmlStart {
					out.WriteString("- ")
				}
			case "td", "th":
				if tt == htmlStart {
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

type htmlToken int

const (
	htmlEOF htmlToken = iota
	htmlText
	htmlStart
	htmlEnd
	htmlSelfClosing
)

// htmlTokenizer splits HTML into text (entities decoded) and tags (their
// names in lower case; attributes are read past, never kept). Comments,
// doctypes and processing instructions are dropped. The text of a raw
// text element (script, style, ...) is its content up to its own end
// tag, tags and all.
type htmlTokenizer struct {
	s   string
	raw string // the raw text element the last start tag opened
}

// rawText lists the elements whose content is read as text up to their
// end tag, and whether entities in it are decoded (escapable raw text).
var rawText = map[string]bool{
	"script": false, "style": false, "xmp": false, "iframe": false, "noembed": false,
	"noframes": false, "noscript": false, "plaintext": false, "textarea": true, "title": true,
}

func (z *htmlTokenizer) next() (htmlToken, string) {
	for {
		if z.s == "" {
			return htmlEOF, ""
		}
		if z.raw != "" {
			return z.rawContent()
		}
		if i := textEnd(z.s); i > 0 {
			text := z.s[:i]
			z.s = z.s[i:]
			return htmlText, html.UnescapeString(text)
		}
		if tt, name, ok := z.markup(); ok {
			return tt, name
		}
	}
}

// textEnd returns where the text at the start of s ends: at the first
// '<' that begins markup (a '<' before anything else is text).
func textEnd(s string) int {
	for i := 0; ; i++ {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			return len(s)
		}
		i += j
		if rest := s[i+1:]; rest != "" && (isLetter(rest[0]) || rest[0] == '!' || rest[0] == '?' || rest[0] == '/' && len(rest) > 1) {
			return i
		}
	}
}

// markup reads the markup that starts at a '<' (textEnd says where): a
// tag (ok) or markup that shows nothing.
func (z *htmlTokenizer) markup() (tt htmlToken, name string, ok bool) {
	s := z.s
	switch {
	case strings.HasPrefix(s, "<!--"):
		z.s = afterComment(s[4:])
		return 0, "", false
	case strings.HasPrefix(s, "<!"), strings.HasPrefix(s, "<?"):
		z.s = after(s[2:], ">")
		return 0, "", false
	case strings.HasPrefix(s, "</>"):
		z.s = s[3:]
		return 0, "", false
	case strings.HasPrefix(s, "</"):
		if !isLetter(s[2]) {
			z.s = after(s[2:], ">")
			return 0, "", false
		}
		tt, s = htmlEnd, s[2:]
	default:
		tt, s = htmlStart, s[1:]
	}
	n := 0
	for n < len(s) && !isSpace(s[n]) && s[n] != '/' && s[n] != '>' {
		n++
	}
	name = strings.ToLower(s[:n])
	rest, selfClosing, closed := skipAttributes(s[n:])
	z.s = rest
	if !closed {
		return 0, "", false // a tag cut off by the end is not a tag
	}
	if tt == htmlStart && selfClosing {
		tt = htmlSelfClosing
	}
	if _, ok := rawText[name]; ok && tt != htmlEnd {
		z.raw = name // <script/> too: the tokenizer takes no note of the '/'
	}
	return tt, name, true
}

// skipAttributes reads past a tag's attributes to the '>' that ends it;
// a '>' in a quoted value does not.
func skipAttributes(s string) (rest string, selfClosing, closed bool) {
	i := 0
	for i < len(s) {
		switch c := s[i]; {
		case c == '>':
			return s[i+1:], i > 0 && s[i-1] == '/', true
		case isSpace(c) || c == '/':
			i++
		default:
			// An attribute's name, then maybe '=' and a value.
			i++
			for i < len(s) && !isSpace(s[i]) && s[i] != '/' && s[i] != '>' && s[i] != '=' {
				i++
			}
			j := i
			for j < len(s) && isSpace(s[j]) {
				j++
			}
			if j == len(s) || s[j] != '=' {
				i = j
				continue
			}
			i = j + 1
			for i < len(s) && isSpace(s[i]) {
				i++
			}
			if i < len(s) && (s[i] == '"' || s[i] == '\'') {
				end := strings.IndexByte(s[i+1:], s[i])
				if end < 0 {
					return "", false, false
				}
				i += end + 2
				continue
			}
			for i < len(s) && !isSpace(s[i]) && s[i] != '>' {
				i++
			}
		}
	}
	return "", false, false
}

// rawContent returns the text of the open raw text element up to its end
// tag: "</" and its name in any case, then white space, '/' or '>'.
func (z *htmlTokenizer) rawContent() (htmlToken, string) {
	name := z.raw
	z.raw = ""
	end := len(z.s)
	if name != "plaintext" {
		for i := 0; ; {
			j := strings.Index(z.s[i:], "</")
			if j < 0 {
				break
			}
			k := i + j + 2
			if k+len(name) <= len(z.s) && strings.EqualFold(z.s[k:k+len(name)], name) &&
				(k+len(name) == len(z.s) || isSpace(z.s[k+len(name)]) || z.s[k+len(name)] == '/' || z.s[k+len(name)] == '>') {
				end = i + j
				break
			}
			i = k
		}
	}
	text := strings.ReplaceAll(z.s[:end], "\x00", "\uFFFD") // as the HTML Standard's raw text states do
	z.s = z.s[end:]
	if rawText[name] {
		text = html.UnescapeString(text)
	}
	if text == "" {
		return z.next()
	}
	return htmlText, text
}

// afterComment returns what follows a comment's end, "-->" (or "--!>",
// or the "<!-->" and "<!--->" that close at once); a comment never
// closed runs to the end.
func afterComment(s string) string {
	if strings.HasPrefix(s, ">") {
		return s[1:]
	}
	if strings.HasPrefix(s, "->") {
		return s[2:]
	}
	for i := 0; i < len(s); i++ {
		if strings.HasPrefix(s[i:], "-->") {
			return s[i+3:]
		}
		if strings.HasPrefix(s[i:], "--!>") {
			return s[i+4:]
		}
	}
	return ""
}

func after(s, sep string) string {
	if _, rest, ok := strings.Cut(s, sep); ok {
		return rest
	}
	return ""
}

func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }
