package ocr

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"errors"
	"strings"
	"testing"
)

func TestDownloadURLResolution(t *testing.T) {
	t.Parallel()
	base, err := baseURL("http://10.0.0.5:7861/monkey/")
	if err != nil {
		t.Fatal(err)
	}
	a := &attempt{base: base}
	for _, tc := range []struct{ in, want string }{
		{"/static/image_parsed_1700000000000_abcd1234.zip", "http://10.0.0.5:7861/monkey/static/image_parsed_1700000000000_abcd1234.zip"},
		{"/static/my doc#1?.zip", "http://10.0.0.5:7861/monkey/static/my%20doc%231%3F.zip"},
		{"/static/%2e%2e.zip", "http://10.0.0.5:7861/monkey/static/%252e%252e.zip"},
		{"http://10.0.0.5:7861/static/my%20x.zip", "http://10.0.0.5:7861/static/my%20x.zip"},
	} {
		got, err := a.download(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("download(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{
		"//evil.example/x.zip", "http://evil.example/x.zip", "https://10.0.0.5:7861/x.zip",
		"static/x.zip", "/static/../secret", "/static/./x.zip", "/static//x.zip", `/static\x.zip`, "file:///etc/passwd",
	} {
		if got, err := a.download(in); err == nil {
			t.Errorf("download(%q) = %q, want an error", in, got)
		}
	}
}

func TestSafeName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"doc_middle.json": true, "out/doc/doc_middle.json": true, "images/": true,
		"../doc_middle.json": false, "/doc_middle.json": false, "a/../../b": false, "a/./b": false,
		`a\b`: false, "C:/x": false, "c:x": false, "": false, "a//b": false, "a\x00b": false,
	} {
		if got := safeName(name); got != want {
			t.Errorf("safeName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestSniff(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"\x89PNG\r\n\x1a\n...":        ".png",
		"\xff\xd8\xff\xdb...":         ".jpg",
		"%PDF-1.4\n...":               ".pdf",
		"\xef\xbb\xbf junk %PDF-1.7 ": ".pdf",
		"GIF89a":                      "",
		"RIFF....WEBP":                "",
		"\x89PN":                      "",
	} {
		ext, _, ok := sniff([]byte(in))
		if ext != want || ok != (want != "") {
			t.Errorf("sniff(%q) = %q %v, want %q", in, ext, ok, want)
		}
	}
}

// rawZip writes one deflated member whose header declares declared bytes
// while it really inflates to len(data).
func rawZip(t *testing.T, name string, data []byte, declared uint64) []byte {
	t.Helper()
	var comp bytes.Buffer
	fw, _ := flate.NewWriter(&comp, flate.BestSpeed)
	_, _ = fw.Write(data)
	_ = fw.Close()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: name, Method: zip.Deflate,
		CompressedSize64: uint64(comp.Len()), UncompressedSize64: declared})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(comp.Bytes())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExtractMiddleBoundsTheInflatedSize(t *testing.T) {
	t.Parallel()
	cfg := Config{MaxMemberBytes: 64 << 10}.withDefaults()
	big := bytes.Repeat([]byte(" "), 1<<20)
	// An honest header is refused before inflating; a lying one is cut off
	// (by archive/zip at the declared size, or by the limit).
	for _, tc := range []struct {
		name     string
		declared uint64
		tooLarge bool
	}{{"honest header", uint64(len(big)), true}, {"lying header", 10, false}} {
		_, err := extractMiddle(rawZip(t, "x_middle.json", big, tc.declared), cfg)
		var b *badResult
		if !errors.As(err, &b) || !errors.Is(b.kind, ErrBadArchive) || tc.tooLarge && !errors.Is(b.kind, ErrTooLarge) {
			t.Errorf("%s: extractMiddle = %v, want ErrBadArchive (too large: %v)", tc.name, err, tc.tooLarge)
		}
	}
	ok := []byte(`{"pdf_info":[]}`)
	got, err := extractMiddle(rawZip(t, "x_middle.json", ok, uint64(len(ok))), cfg)
	if err != nil || !bytes.Equal(got, ok) {
		t.Errorf("extractMiddle = %q, %v", got, err)
	}
}

func TestParseMiddleReadsIntegersAndFractions(t *testing.T) {
	t.Parallel()
	doc := `{"pdf_info":[
		{"page_idx":0,"page_size":[612.0,792.0],"para_blocks":[{"type":"text","bbox":[10,20,30,40],"lines":[]}],
		 "discarded_blocks":[{"type":"discarded","bbox":[0,0,1,1]}]},
		{"page_size":[100,200],"para_blocks":[{"type":"list","bbox":[1.5,2.25,3.5,4.75],"index":0.5}]}
	]}`
	els, sizes, err := parseMiddle([]byte(doc), 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []LayoutElement{
		{Type: "text", BBox: [4]float64{10, 20, 30, 40}, PageIndex: 0},
		{Type: "list", BBox: [4]float64{1.5, 2.25, 3.5, 4.75}, PageIndex: 1},
	}
	if len(els) != 2 || els[0] != want[0] || els[1] != want[1] {
		t.Errorf("elements = %+v", els)
	}
	if len(sizes) != 2 || sizes[0] != [2]float64{612, 792} || sizes[1] != [2]float64{100, 200} {
		t.Errorf("sizes = %v", sizes)
	}
}

func TestClipKeepsUTF8Valid(t *testing.T) {
	t.Parallel()
	s := clip([]byte(strings.Repeat("页", 10)), 4)
	if s != "页…" {
		t.Errorf("clip = %q", s)
	}
}
