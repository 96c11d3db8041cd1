package ocr

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/internal/testkit"
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
		"\x89PNG\r\n\x1a\n...":         ".png",
		"\xff\xd8\xff\xdb...":          ".jpg",
		"%PDF-1.4\n...":                ".pdf",
		"\xef\xbb\xbf junk %PDF-1.7\n": ".pdf",
		"GIF89a":                       "",
		"RIFF....WEBP":                 "",
		"\x89PN":                       "",
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

// directoryOnly builds an archive of n central directory headers (each for
// a stored member named "a"; there are no local headers, which
// archive/zip does not read before Open) and an end record announcing
// announce members: a ZIP64 end record with its locator when zip64 is
// set, else the 16-bit count of a plain one. The directory starts after
// prefix bytes of junk.
func directoryOnly(n int, announce uint64, zip64 bool, prefix int) []byte {
	le := binary.LittleEndian
	hdr := make([]byte, lenCentralHeader+1)
	le.PutUint32(hdr, sigCentralHeader)
	le.PutUint16(hdr[4:], 20)
	le.PutUint16(hdr[6:], 20)
	le.PutUint16(hdr[28:], 1)
	hdr[lenCentralHeader] = 'a'
	dirSize := uint64(n * len(hdr))
	b := make([]byte, prefix, prefix+n*len(hdr)+lenEnd64+lenEnd64Locator+lenEnd)
	for range n {
		b = append(b, hdr...)
	}
	if zip64 {
		at := uint64(len(b))
		b = le.AppendUint32(b, sigEnd64)
		b = le.AppendUint64(b, lenEnd64-12)
		b = le.AppendUint16(b, 45)
		b = le.AppendUint16(b, 45)
		b = le.AppendUint32(b, 0)
		b = le.AppendUint32(b, 0)
		b = le.AppendUint64(b, announce)
		b = le.AppendUint64(b, announce)
		b = le.AppendUint64(b, dirSize)
		b = le.AppendUint64(b, 0)
		b = le.AppendUint32(b, sigEnd64Locator)
		b = le.AppendUint32(b, 0)
		b = le.AppendUint64(b, at)
		b = le.AppendUint32(b, 1)
	}
	b = le.AppendUint32(b, sigEnd)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 0)
	if zip64 {
		b = le.AppendUint16(b, 0xffff)
		b = le.AppendUint16(b, 0xffff)
		b = le.AppendUint32(b, 0xffffffff)
		b = le.AppendUint32(b, 0xffffffff)
	} else {
		b = le.AppendUint16(b, uint16(announce))
		b = le.AppendUint16(b, uint16(announce))
		b = le.AppendUint32(b, uint32(dirSize))
		b = le.AppendUint32(b, 0)
	}
	return le.AppendUint16(b, 0)
}

// TestDirectoryOnlyArchivesAreReadByArchiveZip makes sure the archives the
// next tests build are ones archive/zip really opens with every member:
// otherwise their refusal would prove nothing.
func TestDirectoryOnlyArchivesAreReadByArchiveZip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		b        []byte
		wantRead int
	}{
		{"plain", directoryOnly(7, 7, false, 0), 7},
		{"zip64", directoryOnly(7, 7, true, 0), 7},
		{"prefixed", directoryOnly(7, 7, false, 100), 7},
		// archive/zip compares only 16 bits of the count and reads every
		// header there is.
		{"16-bit count wrapped", directoryOnly(1<<16+3, 3, false, 0), 1<<16 + 3},
	} {
		zr, err := zip.NewReader(bytes.NewReader(tc.b), int64(len(tc.b)))
		if err != nil || len(zr.File) != tc.wantRead {
			t.Errorf("%s: zip.NewReader = %v; want %d members", tc.name, err, tc.wantRead)
			continue
		}
		if err := checkDirectory(tc.b, tc.wantRead); err != nil {
			t.Errorf("%s: checkDirectory at the limit: %v", tc.name, err)
		}
		if err := checkDirectory(tc.b, tc.wantRead-1); !errors.Is(errKind(err), ErrTooLarge) {
			t.Errorf("%s: checkDirectory below the limit = %v, want ErrTooLarge", tc.name, err)
		}
	}
}

func errKind(err error) error {
	var b *badResult
	if errors.As(err, &b) {
		return b.kind
	}
	return err
}

// TestAMillionMemberArchiveIsRefusedWithBoundedMemory: a ZIP64 archive
// whose central directory really holds 10^6 members (about 47 MB; what
// archive/zip would turn into a million *zip.File values, hundreds of MB)
// is refused from its end record, allocating almost nothing. Not parallel,
// so that the MemStats delta is this test's own.
func TestAMillionMemberArchiveIsRefusedWithBoundedMemory(t *testing.T) {
	archive := directoryOnly(1_000_000, 1_000_000, true, 0)
	cfg := Config{}.withDefaults()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := extractMiddle(archive, cfg)
	runtime.ReadMemStats(&after)
	if !errors.Is(errKind(err), ErrTooLarge) || !strings.Contains(err.Error(), "1000000 members") {
		t.Fatalf("extractMiddle = %v, want ErrTooLarge naming 1000000 members", err)
	}
	d := after.TotalAlloc - before.TotalAlloc
	if d > 64<<10 {
		t.Errorf("refusing the archive allocated %d bytes, want at most 64 KiB", d)
	}
	t.Logf("refusing a %d-byte archive of 10^6 members allocated %d bytes", len(archive), d)
	if n := testing.AllocsPerRun(3, func() { _, _ = extractMiddle(archive, cfg) }); n > 8 {
		t.Errorf("refusing the archive took %.0f allocations, want at most 8", n)
	}
}

// TestArchiveWithMoreHeadersThanAnnouncedIsRefused: an end record that
// announces few members (the 16-bit count wrapped, which archive/zip
// accepts) does not hide the headers archive/zip would read.
func TestArchiveWithMoreHeadersThanAnnouncedIsRefused(t *testing.T) {
	archive := directoryOnly(1<<16+100, 100, false, 0)
	cfg := Config{}.withDefaults()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := extractMiddle(archive, cfg)
	runtime.ReadMemStats(&after)
	if !errors.Is(errKind(err), ErrTooLarge) {
		t.Fatalf("extractMiddle = %v, want ErrTooLarge", err)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 64<<10 {
		t.Errorf("refusing the archive allocated %d bytes, want at most 64 KiB", d)
	}
}

// TestPrefixedArchiveStillOpens: a genuine result behind prepended bytes
// (a self-extracting layout) passes the directory check.
func TestPrefixedArchiveStillOpens(t *testing.T) {
	t.Parallel()
	ok := []byte(`{"pdf_info":[]}`)
	archive := append(bytes.Repeat([]byte{'#'}, 300), rawZip(t, "x_middle.json", ok, uint64(len(ok)))...)
	got, err := extractMiddle(archive, Config{}.withDefaults())
	if err != nil || !bytes.Equal(got, ok) {
		t.Fatalf("extractMiddle = %q, %v", got, err)
	}
}

// FuzzCheckDirectory: checkDirectory never panics, and whatever it lets
// through archive/zip opens with at most the limit of members, whatever
// the read sizes the archive was downloaded in.
func FuzzCheckDirectory(f *testing.F) {
	const limit = 3
	for _, seed := range [][]byte{
		directoryOnly(2, 2, false, 0), directoryOnly(4, 4, true, 0), directoryOnly(5, 5, false, 9),
		directoryOnly(3, 3, true, 0)[:40], []byte("PK\x05\x06"), {},
	} {
		f.Add(seed, []byte{7})
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range []string{"a_middle.json", "b"} {
		w, _ := zw.Create(name)
		_, _ = w.Write([]byte("{}"))
	}
	_ = zw.Close()
	f.Add(buf.Bytes(), []byte{1, 3})
	f.Fuzz(func(t *testing.T, body []byte, sizes []byte) {
		b, err := readAnswer(&testkit.SplitReader{Data: body, Sizes: sizes}, -1, 1<<20)
		if err != nil || !bytes.Equal(b, body) {
			t.Fatalf("the download in reads of %v: %d bytes, %v", sizes, len(b), err)
		}
		if checkDirectory(b, limit) != nil {
			return
		}
		if zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b))); (err == nil || errors.Is(err, zip.ErrInsecurePath)) && zr != nil && len(zr.File) > limit {
			t.Fatalf("checkDirectory passed an archive of %d members (limit %d)", len(zr.File), limit)
		}
	})
}
