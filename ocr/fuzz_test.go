package ocr

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/url"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/internal/testkit"
)

// maxErrorText bounds the text of a result error built from a document.
const maxErrorText = 4 << 10

// refParseMiddle is the reference for decodeMiddle: the whole document
// read at once by json.Unmarshal, then checked page by page.
func refParseMiddle(data []byte, maxOutside float64) ([]LayoutElement, [][2]float64, error) {
	var doc struct {
		PdfInfo *[]json.RawMessage `json:"pdf_info"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, bad(ErrBadLayout, "not JSON: %v", err)
	}
	if doc.PdfInfo == nil || len(*doc.PdfInfo) == 0 {
		return nil, nil, bad(ErrBadLayout, "no pages")
	}
	sizes := make([][2]float64, 0, len(*doc.PdfInfo))
	elements := []LayoutElement{}
	for i, raw := range *doc.PdfInfo {
		var pg struct {
			PageIdx    json.RawMessage `json:"page_idx"`
			PageSize   json.RawMessage `json:"page_size"`
			ParaBlocks []struct {
				Type string          `json:"type"`
				BBox json.RawMessage `json:"bbox"`
			} `json:"para_blocks"`
		}
		if err := json.Unmarshal(raw, &pg); err != nil {
			return nil, nil, bad(ErrBadLayout, "page %d: %v", i, err)
		}
		if len(pg.PageIdx) > 0 && string(pg.PageIdx) != "null" {
			var idx float64
			if err := json.Unmarshal(pg.PageIdx, &idx); err != nil || idx != float64(i) {
				return nil, nil, bad(ErrBadLayout, "page %d: page_idx", i)
			}
		}
		size, ok := numbers(pg.PageSize, 2)
		if !ok || !(size[0] > 0 && size[1] > 0) {
			return nil, nil, bad(ErrBadGeometry, "page %d: page_size", i)
		}
		w, h := size[0], size[1]
		sizes = append(sizes, [2]float64{w, h})
		for j, b := range pg.ParaBlocks {
			v, ok := numbers(b.BBox, 4)
			switch {
			case !ok || !(v[2] > v[0] && v[3] > v[1]):
				return nil, nil, bad(ErrBadGeometry, "page %d block %d", i, j)
			case maxOutside >= 0 && (v[2] < -maxOutside*w || v[0] > w+maxOutside*w || v[3] < -maxOutside*h || v[1] > h+maxOutside*h):
				return nil, nil, bad(ErrBadGeometry, "page %d block %d: far outside", i, j)
			}
			elements = append(elements, LayoutElement{Type: b.Type, BBox: [4]float64{v[0], v[1], v[2], v[3]}, PageIndex: i})
		}
	}
	return elements, sizes, nil
}

// deepest is the deepest nesting of brackets in in, strings aside.
func deepest(in []byte) int {
	depth, most, inString := 0, 0, false
	for i := 0; i < len(in); i++ {
		switch c := in[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			most = max(most, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return most
}

// checkMiddle holds decodeMiddle's reading of data (in reads of the given
// sizes) to its reading of the whole and to refParseMiddle: the same
// elements and sizes, or a failure of the same kind.
func checkMiddle(t *testing.T, data []byte, maxOutside float64, sizes []byte) {
	t.Helper()
	lim := limitsOf(Config{}.withDefaults())
	lim.maxOutside = maxOutside
	els, szs, err := decodeMiddle(&testkit.SplitReader{Data: data, Sizes: sizes}, lim)
	wels, wszs, werr := decodeMiddle(bytes.NewReader(data), lim)
	if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
		t.Fatalf("%q in reads of %v: %v; read whole: %v", data, sizes, err, werr)
	}
	if err != nil {
		var b *badResult
		if !errors.As(err, &b) || !errors.Is(b.kind, ErrBadLayout) && !errors.Is(b.kind, ErrBadGeometry) {
			t.Fatalf("decodeMiddle: %T %v, want ErrBadLayout or ErrBadGeometry", err, err)
		}
		if len(err.Error()) > maxErrorText {
			t.Fatalf("decodeMiddle error of %d bytes: upstream text must be clipped", len(err.Error()))
		}
	}
	if !sameLayout(els, szs, wels, wszs) {
		t.Fatalf("%q in reads of %v: %v %v; whole: %v %v", data, sizes, els, szs, wels, wszs)
	}
	if deepest(data) > 9990 {
		return // encoding/json's depth limit counts from each value the decoder reads
	}
	rels, rszs, rerr := refParseMiddle(data, maxOutside)
	var b, rb *badResult
	errors.As(err, &b)
	errors.As(rerr, &rb)
	if (err == nil) != (rerr == nil) || b != nil && !errors.Is(b.kind, rb.kind) {
		t.Fatalf("%q: decodeMiddle %v, encoding/json %v", data, err, rerr)
	}
	if err == nil && !sameLayout(els, szs, rels, rszs) {
		t.Fatalf("%q: %v %v, encoding/json %v %v", data, els, szs, rels, rszs)
	}
}

func sameLayout(a []LayoutElement, as [][2]float64, b []LayoutElement, bs [][2]float64) bool {
	if len(a) != len(b) || len(as) != len(bs) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	for i := range as {
		if as[i] != bs[i] {
			return false
		}
	}
	return true
}

// FuzzParseMiddle reads random middle.json documents in random read
// sizes. It never panics; a failure is a *badResult of kind ErrBadLayout
// or ErrBadGeometry with a bounded message; the result is the one of
// reading the whole document and the one of encoding/json
// (refParseMiddle); an accepted document has a positive finite size per
// page and elements with finite, non-degenerate boxes on existing pages,
// within the far-outside margin.
func FuzzParseMiddle(f *testing.F) {
	for _, s := range []string{
		`{"pdf_info":[{"page_idx":0,"page_size":[612,792],"para_blocks":[{"type":"text","bbox":[10,20,30,40],"lines":[]}]},{"page_size":[100.5,200],"para_blocks":[{"type":"title","bbox":[1.5,2.25,3.5,4.75]}]}]}`,
		`{"pdf_info":[{"page_idx":1,"page_size":[612,792]}]}`,
		`{"pdf_info":[{"page_size":[0,792],"para_blocks":[]}]}`,
		`{"pdf_info":[{"page_size":[612,792],"para_blocks":[{"type":"text","bbox":[30,20,10,40]}]}]}`,
		`{"pdf_info":[{"page_size":[612,792],"para_blocks":[{"type":"text","bbox":[1e308,0,1e309,1]}]}]}`,
		`{"pdf_info":[{"page_size":[612,792],"para_blocks":[{"type":"text","bbox":[null,0,1,1]}]}]}`,
		`{"pdf_info":[]}`, `{"pdf_info":null}`, `{"pages":[]}`, `[1]`, `{"pdf_info":[{"page_size":"612x792"}]}`,
		`{"pdf_info":[{"page_size":[612,792],"para_blocks":[{"type":"text","bbox":[9000,0,9001,1]}]}]}`,
		`{"PDF_INFO":[{"Page_Size":[1,1],"para_blocks":[{"type":"a","bbox":[0,0,1,1]}],"para_blocks":[{"bbox":[0,0,.5,.5]}]}]}`,
		`{"pdf_info":[{"page_size":[1,1]}],"pdf_info":[{"page_size":[2,2],"preproc_blocks":[{"x":[1,{"y":null}]}]}]}`,
	} {
		f.Add([]byte(s), 1.0, []byte{3})
	}
	f.Add([]byte(`{"pdf_info":[{"page_size":[10,10],"para_blocks":[{"type":"x","bbox":[-50,-50,-40,-40]}]}]}`), -1.0, []byte{1})
	f.Fuzz(func(t *testing.T, data []byte, maxOutside float64, sizes []byte) {
		if math.IsNaN(maxOutside) {
			maxOutside = 1
		}
		checkMiddle(t, data, maxOutside, sizes)
		els, pageSizes, err := parseMiddle(data, maxOutside)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("invalid JSON %q accepted", data)
		}
		if len(pageSizes) == 0 || els == nil {
			t.Fatalf("accepted with %d pages, elements %v", len(pageSizes), els)
		}
		for i, s := range pageSizes {
			if !(s[0] > 0 && s[1] > 0) || math.IsInf(s[0], 0) || math.IsInf(s[1], 0) {
				t.Fatalf("page %d size %v", i, s)
			}
		}
		for _, e := range els {
			if e.PageIndex < 0 || e.PageIndex >= len(pageSizes) {
				t.Fatalf("element on page %d of %d", e.PageIndex, len(pageSizes))
			}
			b := e.BBox
			for _, v := range b {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("box %v", b)
				}
			}
			if !(b[2] > b[0] && b[3] > b[1]) {
				t.Fatalf("degenerate box %v", b)
			}
			if maxOutside >= 0 {
				s := pageSizes[e.PageIndex]
				mw, mh := maxOutside*s[0], maxOutside*s[1]
				if b[2] < -mw || b[0] > s[0]+mw || b[3] < -mh || b[1] > s[1]+mh {
					t.Fatalf("box %v far outside page %v", b, s)
				}
			}
		}
	})
}

// fuzzZip writes a ZIP of the given members (name, content) for seeds.
func fuzzZip(members ...string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := 0; i+1 < len(members); i += 2 {
		w, err := zw.Create(members[i])
		if err != nil {
			panic(err)
		}
		_, _ = w.Write([]byte(members[i+1]))
	}
	_ = zw.Close()
	return buf.Bytes()
}

// FuzzExtractMiddle reads random result archives with small limits, as a
// download delivers them in random read sizes. It never panics; a failure
// is a *badResult of an archive or layout kind with a bounded message; a
// success returns at most MaxMemberBytes bytes from an archive with at
// most MaxMembers entries that holds a safe *_middle.json member, and
// readLayout reads from it what decodeMiddle reads from those bytes.
func FuzzExtractMiddle(f *testing.F) {
	doc := `{"pdf_info":[{"page_size":[612,792],"para_blocks":[]}]}`
	f.Add(fuzzZip("doc/doc_middle.json", doc, "doc/images/a.jpg", "jpeg"), []byte{5})
	f.Add(fuzzZip("../doc_middle.json", doc, "b/middle.json", doc, "a_middle.json", doc), []byte{1})
	f.Add(fuzzZip("x.md", "# no middle"), []byte{})
	f.Add(fuzzZip("big_middle.json", string(bytes.Repeat([]byte("a"), 5000))), []byte{9})
	f.Add([]byte("PK\x05\x06"+string(make([]byte, 18))), []byte{2})
	f.Add([]byte("not a zip"), []byte{1})
	cfg := Config{MaxMemberBytes: 4 << 10, MaxMembers: 8, MaxLayoutPages: 4, MaxLayoutBlocks: 16}.withDefaults()
	f.Fuzz(func(t *testing.T, body []byte, sizes []byte) {
		archive, err := readAnswer(&testkit.SplitReader{Data: body, Sizes: sizes}, -1, 1<<20)
		if err != nil || !bytes.Equal(archive, body) {
			t.Fatalf("the download in reads of %v: %d bytes, %v", sizes, len(archive), err)
		}
		got, err := extractMiddle(archive, cfg)
		els, pageSizes, raw, lerr := readLayout(archive, cfg)
		if err != nil {
			var b *badResult
			if !errors.As(err, &b) || !errors.Is(b.kind, ErrBadArchive) {
				t.Fatalf("extractMiddle: %T %v, want an ErrBadArchive kind", err, err)
			}
			if len(err.Error()) > maxErrorText {
				t.Fatalf("error text of %d bytes", len(err.Error()))
			}
			if lerr == nil || lerr.Error() != err.Error() {
				t.Fatalf("readLayout: %v, extractMiddle: %v", lerr, err)
			}
			return
		}
		if int64(len(got)) > cfg.MaxMemberBytes {
			t.Fatalf("%d bytes, more than the limit of %d", len(got), cfg.MaxMemberBytes)
		}
		zr, zerr := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
		if zr == nil {
			t.Fatalf("accepted an archive archive/zip cannot open: %v", zerr)
		}
		if len(zr.File) > cfg.MaxMembers {
			t.Fatalf("accepted %d members", len(zr.File))
		}
		wels, wsizes, werr := decodeMiddle(bytes.NewReader(got), limitsOf(cfg))
		if fmtErr(lerr) != fmtErr(werr) || !sameLayout(els, pageSizes, wels, wsizes) {
			t.Fatalf("readLayout: %v %v %v; the member's bytes: %v %v %v", els, pageSizes, lerr, wels, wsizes, werr)
		}
		if lerr == nil && !bytes.Equal(raw, got) {
			t.Fatalf("raw %q, the member %q", raw, got)
		}
	})
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzResolveDownloadURL resolves the download_url of a /parse answer,
// read in random sizes, against a random base URL. It never panics; what
// it accepts is a URL of the base's scheme and host whose path is the
// base path (for a path) and escaped segments, none empty, "." or "..".
func FuzzResolveDownloadURL(f *testing.F) {
	for _, tc := range [][2]string{
		{"http://10.0.0.5:7861/monkey/", "/static/image_parsed_1700000000000_abcd1234.zip"},
		{"http://10.0.0.5:7861", "/static/my doc#1?.zip"},
		{"https://ocr.example:8443/x", "https://OCR.example:8443/static/a%20b.zip"},
		{"http://h", "//evil.example/x.zip"},
		{"http://h", "/static/../secret"},
		{"http://h/p", `/static\x.zip`},
		{"http://h", "file:///etc/passwd"},
		{"http://[::1]:80/", "/static/%2e%2e.zip"},
	} {
		f.Add(tc[0], tc[1], []byte{3})
	}
	f.Fuzz(func(t *testing.T, rawBase, dl string, sizes []byte) {
		base, err := baseURL(rawBase)
		if err != nil {
			return
		}
		body, _ := json.Marshal(map[string]any{"success": true, "download_url": dl})
		got, err := readAnswer(&testkit.SplitReader{Data: body, Sizes: sizes}, -1, 1<<20)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("answer in reads of %v: %q, %v", sizes, got, err)
		}
		ans, ok := decodeAnswer[parseAnswer](got)
		if !ok || ans.DownloadURL == nil {
			t.Fatalf("%s: not read", got)
		}
		target, err := resolveDownload(base, *ans.DownloadURL)
		if err != nil {
			return
		}
		u, err := url.Parse(target)
		if err != nil {
			t.Fatalf("resolved %q to %q, which does not parse: %v", dl, target, err)
		}
		if u.Scheme != base.Scheme || u.Host != base.Host || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			t.Fatalf("resolved %q against %q to %q: another server", dl, rawBase, target)
		}
		rest := u.EscapedPath()
		if strings.HasPrefix(*ans.DownloadURL, "/") {
			var ok bool
			if rest, ok = strings.CutPrefix(rest, base.EscapedPath()); !ok {
				t.Fatalf("resolved %q to %q outside the base path %q", dl, target, base.EscapedPath())
			}
		}
		for _, s := range strings.Split(strings.TrimPrefix(rest, "/"), "/") {
			if s == "" || s == "." || s == ".." || strings.Contains(s, `\`) {
				t.Fatalf("resolved %q to %q: segment %q", dl, target, s)
			}
		}
	})
}

// FuzzOCRAnswer reads random /ocr/text and /parse answers in random read
// sizes, under a random size limit. It never panics; the body read is the
// body sent (or refused as too large exactly when it is larger than the
// limit); an answer is accepted exactly when encoding/json reads a JSON
// object of the answer's type from it with a "success" boolean, and what
// is read is what json.Unmarshal reads.
func FuzzOCRAnswer(f *testing.F) {
	for _, s := range []string{
		`{"success":true,"task_type":"text","content":"Hello\nworld","message":"Text extraction completed successfully"}`,
		`{"success":false,"task_type":"text","content":"","message":"OCR task failed: CUDA out of memory"}`,
		`{"success":true,"message":"PDF parsing completed","download_url":"/static/a_parsed_1_x.zip","files":["a.md"]}`,
		`{"success":"yes"}`, `{"content":5,"success":true}`, `[true]`, `{"success":null}`, `{"SUCCESS":true,"Content":"x"}`,
		`<html>502</html>`, `{"success":true,"content":"\ud800"}`,
	} {
		f.Add([]byte(s), []byte{2}, uint16(300), false)
	}
	f.Fuzz(func(t *testing.T, body, sizes []byte, limit uint16, layout bool) {
		got, err := readAnswer(&testkit.SplitReader{Data: body, Sizes: sizes}, -1, int64(limit))
		if len(body) > int(limit) {
			if !errors.Is(err, errTooLarge) {
				t.Fatalf("%d bytes under a limit of %d: %v", len(body), limit, err)
			}
			return
		}
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("in reads of %v: %q, %v", sizes, got, err)
		}
		if layout {
			ans, ok := decodeAnswer[parseAnswer](got)
			var want parseAnswer
			wok := json.Unmarshal(body, &want) == nil && want.Success != nil
			if ok != wok || ok && (*ans.Success != *want.Success || deref(ans.DownloadURL) != deref(want.DownloadURL) || deref(ans.Message) != deref(want.Message)) {
				t.Fatalf("%q: %+v %v, encoding/json %+v %v", body, ans, ok, want, wok)
			}
			return
		}
		ans, ok := decodeAnswer[textAnswer](got)
		var want textAnswer
		wok := json.Unmarshal(body, &want) == nil && want.Success != nil
		if ok != wok || ok && (*ans.Success != *want.Success || deref(ans.Content) != deref(want.Content) || deref(ans.Message) != deref(want.Message)) {
			t.Fatalf("%q: %+v %v, encoding/json %+v %v", body, ans, ok, want, wok)
		}
	})
}
