package hub

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

var refTags = map[html.TokenType]htmlToken{html.StartTagToken: htmlStart, html.EndTagToken: htmlEnd, html.SelfClosingTagToken: htmlSelfClosing}

// htmlTextRef is HTMLText over golang.org/x/net/html's tokenizer: the
// reference its own tokenizer is held to.
func htmlTextRef(b []byte) string {
	z := html.NewTokenizer(bytes.NewReader(b))
	return reduceHTML(func() (htmlToken, string) {
		for {
			switch tt := z.Next(); tt {
			case html.ErrorToken:
				return htmlEOF, ""
			case html.TextToken:
				return htmlText, string(z.Text())
			case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
				name, _ := z.TagName()
				return refTags[tt], string(name)
			}
		}
	})
}

// What a rich result's HTML holds (pandas' tables, IPython's displays,
// hand-written snippets) reads the same through both tokenizers.
func TestHTMLTextAsTheReference(t *testing.T) {
	for _, in := range []string{
		`<div><style scoped>.dataframe tbody tr th:only-of-type { vertical-align: middle; }</style>` +
			`<table border="1" class="dataframe"><thead><tr style="text-align: right;"><th></th><th>a</th></tr></thead>` +
			`<tbody><tr><th>0</th><td>1.5</td></tr></tbody></table><p>2 rows &times; 1 columns</p></div>`,
		`<!DOCTYPE html><html><head><title>T &amp; t</title></head><body><h1>Head</h1><!-- note --><p>x &lt; y &gt; z &#39;q&#x27; &nbsp;e</p></body></html>`,
		`<a href="x>y" title='it"s'>link</a> and <img src=a.png alt=b/> <br/>after`,
		`<script>if (a < b && "</div>") {}</script>shown<SCRIPT type="x">hidden</Script >shown too`,
		`<textarea>a <b>c</b> &amp;</textarea><xmp><i>x</i></xmp>`,
		`<p>unterminated <b attr="x`,
		`a < b and c<d e</ f> g<!--x-->h<!-->i<!--->j<?php k ?>l</>m`,
		`<ul><li>one<li>two</ul><ol><li>1</ol>`,
		"tabs\tand\r\nnewlines\f  and&ampcopy; &copy &notit; &#0; &#xD800;",
		`<UL><LI>Upper</LI></UL><Td>cell</tD>`,
		`<p/>x<br / >y<hr class=a / >z`,
		"<sCript/>\x00a<textarea>b\x00c</textarea>d\x00e",
	} {
		assert := func(got, want string) {
			t.Helper()
			if got != want {
				t.Errorf("%q\n got %q\nwant %q", in, got, want)
			}
		}
		assert(HTMLText([]byte(in)), htmlTextRef([]byte(in)))
	}
}

// FuzzHTMLTextAsTheReference builds HTML from the fuzzer's bytes, a token
// at a time (tags with and without quoted attributes, text with entities,
// comments, raw text elements), so that most inputs are HTML a result
// could hold, and holds HTMLText to the reference on each.
func FuzzHTMLTextAsTheReference(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})
	f.Add([]byte("script table tr td li p"))
	tags := []string{"p", "div", "table", "tr", "td", "th", "li", "ul", "b", "br", "script", "style", "title", "head", "textarea", "a", "span", "TD", "Script"}
	texts := []string{"word", " ", "\n", "&amp;", "&lt;", "&#65;", "&copy", "x y", "<", ">", "a<b", "é", "\t\t"}
	attrs := []string{"", ` class="c"`, ` a='x>y'`, ` b=1`, ` c`, ` d = "q"`, ` /`}
	f.Fuzz(func(t *testing.T, b []byte) {
		var in strings.Builder
		for i := 0; i+1 < len(b); i += 2 {
			k, v := int(b[i]), int(b[i+1])
			switch k % 6 {
			case 0, 1:
				in.WriteString(texts[v%len(texts)])
			case 2:
				in.WriteString("<" + tags[v%len(tags)] + attrs[(v/len(tags))%len(attrs)] + ">")
			case 3:
				in.WriteString("</" + tags[v%len(tags)] + ">")
			case 4:
				in.WriteString("<" + tags[v%len(tags)] + "/>")
			case 5:
				in.WriteString([]string{"<!-- c -->", "<!DOCTYPE html>", "<!-->", "</>"}[v%4])
			}
		}
		s := in.String()
		if got, want := HTMLText([]byte(s)), htmlTextRef([]byte(s)); got != want {
			t.Fatalf("%q\n got %q\nwant %q", s, got, want)
		}
	})
}

// FuzzHTMLTextTokensAsTheReference holds the tokenizer to the reference
// on any bytes without '&': entities are decoded by package html, whose
// table is x/net/html's but which reads a malformed numeric reference
// ("&#0A") otherwise.
func FuzzHTMLTextTokensAsTheReference(f *testing.F) {
	f.Add([]byte("<a b='c>'>x</a><script/><p>y<\vz</ q><!-x>"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if bytes.IndexByte(b, '&') >= 0 {
			return
		}
		if got, want := HTMLText(b), htmlTextRef(b); got != want {
			t.Fatalf("%q\n got %q\nwant %q", b, got, want)
		}
	})
}
