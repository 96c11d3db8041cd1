package ocr

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"testing"
)

// maxErrorText bounds the text of a result error built from a document.
const maxErrorText = 4 << 10

// FuzzParseMiddle parses random middle.json documents. It never panics; a
// failure is a *badResult of kind ErrBadLayout or ErrBadGeometry with a
// bounded message; invalid JSON is refused; an accepted document has a
// positive finite size per page and elements with finite, non-degenerate
// boxes on existing pages, within the far-outside margin.
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
	} {
		f.Add([]byte(s), 1.0)
	}
	f.Add([]byte(`{"pdf_info":[{"page_size":[10,10],"para_blocks":[{"type":"x","bbox":[-50,-50,-40,-40]}]}]}`), -1.0)
	f.Fuzz(func(t *testing.T, data []byte, maxOutside float64) {
		if math.IsNaN(maxOutside) {
			maxOutside = 1
		}
		els, sizes, err := parseMiddle(data, maxOutside)
		if err != nil {
			var b *badResult
			if !errors.As(err, &b) || b.kind != ErrBadLayout && b.kind != ErrBadGeometry {
				t.Fatalf("parseMiddle: %T %v, want ErrBadLayout or ErrBadGeometry", err, err)
			}
			if len(err.Error()) > maxErrorText {
				t.Fatalf("parseMiddle error of %d bytes: upstream text must be clipped", len(err.Error()))
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("invalid JSON %q accepted", data)
		}
		if len(sizes) == 0 || els == nil {
			t.Fatalf("accepted with %d pages, elements %v", len(sizes), els)
		}
		for i, s := range sizes {
			if !(s[0] > 0 && s[1] > 0) || math.IsInf(s[0], 0) || math.IsInf(s[1], 0) {
				t.Fatalf("page %d size %v", i, s)
			}
		}
		for _, e := range els {
			if e.PageIndex < 0 || e.PageIndex >= len(sizes) {
				t.Fatalf("element on page %d of %d", e.PageIndex, len(sizes))
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
				s := sizes[e.PageIndex]
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

// FuzzExtractMiddle reads random result archives with small limits. It
// never panics; a failure is a *badResult of an archive kind with a bounded
// message; a success returns at most MaxMemberBytes bytes from an archive
// with at most MaxMembers entries that holds a safe *_middle.json member.
func FuzzExtractMiddle(f *testing.F) {
	doc := `{"pdf_info":[{"page_size":[612,792],"para_blocks":[]}]}`
	f.Add(fuzzZip("doc/doc_middle.json", doc, "doc/images/a.jpg", "jpeg"))
	f.Add(fuzzZip("../doc_middle.json", doc, "b/middle.json", doc, "a_middle.json", doc))
	f.Add(fuzzZip("x.md", "# no middle"))
	f.Add(fuzzZip("big_middle.json", string(bytes.Repeat([]byte("a"), 5000))))
	f.Add([]byte("PK\x05\x06" + string(make([]byte, 18))))
	f.Add([]byte("not a zip"))
	cfg := Config{MaxMemberBytes: 4 << 10, MaxMembers: 8}.withDefaults()
	f.Fuzz(func(t *testing.T, archive []byte) {
		got, err := extractMiddle(archive, cfg)
		if err != nil {
			var b *badResult
			if !errors.As(err, &b) || !errors.Is(b.kind, ErrBadArchive) {
				t.Fatalf("extractMiddle: %T %v, want an ErrBadArchive kind", err, err)
			}
			if len(err.Error()) > maxErrorText {
				t.Fatalf("error text of %d bytes", len(err.Error()))
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
	})
}
