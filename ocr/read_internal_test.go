package ocr

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// middleGen writes random middle.json documents: mostly well-formed, with
// what encoding/json must be matched on — repeated keys (pdf_info, page
// members, para_blocks), keys in other cases, escapes and odd strings,
// nulls, numbers in every form, members of the wrong type — and now and
// then a byte of damage.
type middleGen struct {
	r *rand.Rand
	b bytes.Buffer
}

func (g *middleGen) one(k int) bool { return g.r.IntN(k) == 0 }

// pick returns one of common, or once in 30 times one of rare.
func (g *middleGen) pick(common []string, rare ...string) string {
	if len(rare) > 0 && g.one(30) {
		return rare[g.r.IntN(len(rare))]
	}
	return common[g.r.IntN(len(common))]
}

func (g *middleGen) key(k string) {
	if g.one(30) {
		k = strings.ToUpper(k)
	}
	g.b.WriteString(strconv.Quote(k) + ":")
}

func (g *middleGen) num(v float64) {
	switch g.r.IntN(80) {
	case 0, 1, 2, 3, 4:
		g.b.WriteString(strconv.FormatFloat(v, 'e', -1, 64))
	case 5:
		g.b.WriteString([]string{"null", "1e309", "-0", `"1"`, "1.5e2", "0"}[g.r.IntN(6)])
	default:
		g.b.WriteString(strconv.FormatFloat(v, 'f', g.r.IntN(3), 64))
	}
}

func (g *middleGen) block(w, h float64) {
	g.b.WriteByte('{')
	g.key("type")
	g.b.WriteString(g.pick([]string{`"text"`, `"title"`, `"image"`, `"t\u00e9xt\n\ud83d\ude00"`, `"\ud800"`}, "null", "5"))
	g.b.WriteString(`,"lines":[{"spans":[{"content":"a\"b"}]}]`)
	times := 1
	if g.one(30) {
		times = 2 // the last bbox wins
	}
	for range times {
		g.b.WriteByte(',')
		g.key("bbox")
		x, y := g.r.Float64()*w, g.r.Float64()*h
		g.b.WriteByte('[')
		for k, v := range []float64{x, y, x + 1 + g.r.Float64()*10, y + 1 + g.r.Float64()*10} {
			if k > 0 {
				g.b.WriteByte(',')
			}
			if g.one(200) {
				v = -v - 20*w
			}
			g.num(v)
		}
		g.b.WriteByte(']')
	}
	g.b.WriteByte('}')
}

func (g *middleGen) page(i int) {
	if g.one(100) {
		g.b.WriteString([]string{"null", "[]", "7"}[g.r.IntN(3)])
		return
	}
	w, h := float64(100+g.r.IntN(600)), float64(100+g.r.IntN(800))
	members := []func(){
		func() {
			g.key("page_idx")
			g.b.WriteString(g.pick([]string{strconv.Itoa(i), "null"}, strconv.Itoa(i+1), `"0"`))
		},
		func() {
			g.key("page_size")
			g.b.WriteByte('[')
			g.num(w)
			g.b.WriteByte(',')
			g.num(h)
			g.b.WriteByte(']')
		},
		func() {
			g.key("para_blocks")
			if g.one(30) {
				g.b.WriteString([]string{"null", "{}", `"x"`}[g.r.IntN(3)])
				return
			}
			g.b.WriteByte('[')
			for k := range g.r.IntN(5) {
				if k > 0 {
					g.b.WriteByte(',')
				}
				g.block(w, h)
			}
			g.b.WriteByte(']')
		},
		func() { g.key("preproc_blocks"); g.b.WriteString(`[{"type":"text","bbox":[0,0,1,1]},[1,2],null]`) },
		func() { g.key("discarded_blocks"); g.b.WriteString(`[{"type":"discarded","bbox":[0,0,1,1]}]`) },
	}
	if g.one(8) {
		members = append(members, members[g.r.IntN(3)])
	}
	g.b.WriteByte('{')
	for k, m := range g.r.Perm(len(members)) {
		if k > 0 {
			g.b.WriteByte(',')
		}
		members[m]()
	}
	g.b.WriteByte('}')
}

func (g *middleGen) doc() []byte {
	g.b.Reset()
	info := func() {
		g.key("pdf_info")
		if g.one(40) {
			g.b.WriteString([]string{"null", "{}", "[]"}[g.r.IntN(3)])
			return
		}
		g.b.WriteByte('[')
		for i := range 1 + g.r.IntN(3) {
			if i > 0 {
				g.b.WriteString(", ")
			}
			g.page(i)
		}
		g.b.WriteByte(']')
	}
	g.b.WriteString(`{"_parse_type":"ocr",`)
	info()
	if g.one(10) {
		g.b.WriteByte(',')
		info()
	}
	g.b.WriteString(`,"_version_name":"0.0.1"}`)
	out := bytes.Clone(g.b.Bytes())
	if g.one(12) {
		out[g.r.IntN(len(out))] = `{}[]",:0123456789eE.+- nx\`[g.r.IntN(26)]
	}
	return out
}

// TestDecodeMiddleMatchesEncodingJSON holds decodeMiddle to a whole
// reading by encoding/json (refParseMiddle) on random documents read in
// random sizes.
func TestDecodeMiddleMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	g := &middleGen{r: rand.New(rand.NewPCG(5, 8))}
	accepted := 0
	for range 3000 {
		doc := g.doc()
		sizes := []byte{byte(1 + g.r.IntN(30)), byte(1 + g.r.IntN(7))}
		checkMiddle(t, doc, 1, sizes)
		if _, _, err := refParseMiddle(doc, 1); err == nil {
			accepted++
		}
	}
	if accepted < 300 || accepted > 2700 {
		t.Errorf("%d of 3000 documents accepted: the generator must give both outcomes", accepted)
	}
}

// middleDocs are documents every reader test reads.
var middleDocs = []string{
	`{"pdf_info":[{"page_idx":0,"page_size":[612,792],"para_blocks":[{"type":"text","bbox":[10,20,30,40],"lines":[{"spans":[{"content":"a\"\u00e9"}]}]}],` +
		`"discarded_blocks":[{"type":"discarded","bbox":[0,0,1,1]}]},{"page_size":[100.5,200],"para_blocks":[{"type":"title","bbox":[1.5,2.25,3.5,4.75]}]}],"_version_name":"0.0.1"}`,
	`{"pdf_info":[{"page_size":[612,792],"para_blocks":[{"type":"text","bbox":[30,20,10,40]}]}]}`,
	`{"pdf_info":[{"page_idx":3,"page_size":[1,1]}]}`,
}

// TestDecodeMiddleSplitAtEveryOffset reads each document in two reads
// split at every offset and through testing/iotest's readers: the result
// is the one of reading it whole.
func TestDecodeMiddleSplitAtEveryOffset(t *testing.T) {
	t.Parallel()
	lim := limitsOf(Config{}.withDefaults())
	for _, doc := range middleDocs {
		wels, wsizes, werr := decodeMiddle(strings.NewReader(doc), lim)
		check := func(how string, r io.Reader) {
			t.Helper()
			els, sizes, err := decodeMiddle(r, lim)
			if fmtErr(err) != fmtErr(werr) || !sameLayout(els, sizes, wels, wsizes) {
				t.Fatalf("%s: %v %v %v; whole: %v %v %v\n%s", how, els, sizes, err, wels, wsizes, werr, doc)
			}
		}
		for k := range len(doc) + 1 {
			check("split at "+strconv.Itoa(k), io.MultiReader(strings.NewReader(doc[:k]), strings.NewReader(doc[k:])))
		}
		check("one byte", iotest.OneByteReader(strings.NewReader(doc)))
		check("halves", iotest.HalfReader(strings.NewReader(doc)))
		check("data with EOF", iotest.DataErrReader(strings.NewReader(doc)))
		check("one byte, data with EOF", iotest.DataErrReader(iotest.OneByteReader(strings.NewReader(doc))))
		checkMiddle(t, []byte(doc), 1, []byte{1})
	}
}

// TestDecodeMiddleReaderErrorsMidBody: a member that fails to inflate
// after any number of bytes is reported as that failure (ErrBadArchive,
// "cannot read"), never as a broken layout.
func TestDecodeMiddleReaderErrorsMidBody(t *testing.T) {
	t.Parallel()
	boom := errors.New("flate: corrupt input")
	lim := limitsOf(Config{}.withDefaults())
	for _, doc := range middleDocs {
		for k := range len(doc) {
			for _, r := range []io.Reader{
				io.MultiReader(strings.NewReader(doc[:k]), iotest.ErrReader(boom)),
				iotest.OneByteReader(io.MultiReader(strings.NewReader(doc[:k]), iotest.ErrReader(boom))),
			} {
				_, _, err := decodeMiddle(r, lim)
				var rf *readFailure
				if !errors.As(err, &rf) || !errors.Is(err, boom) {
					t.Fatalf("failing after %d bytes: %v, want the read failure\n%s", k, err, doc)
				}
			}
		}
	}
}

// blocksArchive is a result ZIP whose *_middle.json has one page of n
// blocks, in para_blocks or (before them) in preproc_blocks, or n pages.
func blocksArchive(t testing.TB, n int, where string) ([]byte, int) {
	t.Helper()
	var doc bytes.Buffer
	blocks := func() {
		doc.WriteByte('[')
		for i := range n {
			if i > 0 {
				doc.WriteByte(',')
			}
			doc.WriteString(`{"type":"text","bbox":[1,1,2,2]}`)
		}
		doc.WriteByte(']')
	}
	doc.WriteString(`{"pdf_info":[`)
	switch where {
	case "para_blocks":
		doc.WriteString(`{"page_idx":0,"page_size":[612,792],"para_blocks":`)
		blocks()
		doc.WriteString(`}`)
	case "preproc_blocks":
		doc.WriteString(`{"preproc_blocks":`)
		blocks()
		doc.WriteString(`,"page_idx":0,"page_size":[612,792],"para_blocks":[]}`)
	case "pages":
		for i := range n {
			if i > 0 {
				doc.WriteByte(',')
			}
			doc.WriteString(`{"page_size":[612,792]}`)
		}
	}
	doc.WriteString(`],"_parse_type":"ocr"}`)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "doc/doc_middle.json", Method: zip.Deflate})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(doc.Bytes())
	_ = zw.Close()
	return buf.Bytes(), doc.Len()
}

// TestAMillionBlockLayoutIsRefusedFast: a result ZIP of about 100 KB whose
// *_middle.json holds a million blocks (33 MB of JSON) is refused as soon
// as the block past MaxLayoutBlocks is met — a ResultInvalidError of
// ErrBadLayout and ErrTooLarge naming the limit — having read and held a
// small part of it: the bytes before the limit and the blocks up to it.
// So are a million blocks of an array that is only skipped, and a
// document of more pages than MaxLayoutPages.
func TestAMillionBlockLayoutIsRefusedFast(t *testing.T) {
	cfg := Config{}.withDefaults()
	for _, tc := range []struct {
		where, limit string
		n            int
	}{
		{"para_blocks", "MaxLayoutBlocks", 1_000_000},
		{"preproc_blocks", "MaxLayoutBlocks", 1_000_000},
		{"pages", "MaxLayoutPages", 200_000},
	} {
		archive, docLen := blocksArchive(t, tc.n, tc.where)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, _, _, err := readLayout(archive, cfg)
		runtime.ReadMemStats(&after)
		var b *badResult
		if !errors.As(err, &b) || !errors.Is(b.kind, ErrTooLarge) || !errors.Is(b.kind, ErrBadLayout) || !strings.Contains(err.Error(), tc.limit) {
			t.Fatalf("%s: readLayout = %v, want ErrTooLarge and ErrBadLayout naming %s", tc.where, err, tc.limit)
		}
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: an archive of %d bytes (a middle.json of %.1f MB): refused after allocating %.1f MiB: %v",
			tc.where, len(archive), float64(docLen)/1e6, float64(alloc)/(1<<20), err)
		if alloc > 48<<20 {
			t.Errorf("%s: refusing the layout allocated %.1f MiB, want at most 48 MiB", tc.where, float64(alloc)/(1<<20))
		}
	}
	// At the limits, the same layouts are read.
	small := Config{MaxLayoutBlocks: 1000, MaxLayoutPages: 1000}.withDefaults()
	for _, where := range []string{"para_blocks", "preproc_blocks", "pages"} {
		archive, _ := blocksArchive(t, 1000, where)
		if _, _, _, err := readLayout(archive, small); err != nil {
			t.Errorf("%s at the limit: %v", where, err)
		}
		archive, _ = blocksArchive(t, 1001, where)
		if _, _, _, err := readLayout(archive, small); !errors.Is(errKind(err), ErrTooLarge) {
			t.Errorf("%s one past the limit: %v, want ErrTooLarge", where, err)
		}
	}
}

// TestReadAnswerAnyReads reads /ocr/text and /parse answers through
// testing/iotest's readers, split at every offset and failing mid-body:
// the body read is the body sent, a failure is reported, a body beyond
// the limit is refused (before a byte is read when Content-Length says
// so), and what is read decodes as encoding/json reads it.
func TestReadAnswerAnyReads(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"success":true,"task_type":"text","content":"Hello\nw\u00f6rld \ud83d\ude00","message":"Text extraction completed successfully"}`,
		`{"success":true,"message":"PDF parsing completed","download_url":"/static/a_parsed_1_x.zip","files":["a.md"]}`,
	} {
		read := func(how string, r io.Reader) {
			t.Helper()
			got, err := readAnswer(r, -1, 1<<20)
			if err != nil || string(got) != body {
				t.Fatalf("%s: %q, %v", how, got, err)
			}
			if ans, ok := decodeAnswer[textAnswer](got); !ok || !*ans.Success {
				t.Fatalf("%s: not an answer", how)
			}
		}
		read("one byte", iotest.OneByteReader(strings.NewReader(body)))
		read("halves", iotest.HalfReader(strings.NewReader(body)))
		read("data with EOF", iotest.DataErrReader(strings.NewReader(body)))
		for k := range len(body) + 1 {
			read("split at "+strconv.Itoa(k), io.MultiReader(strings.NewReader(body[:k]), strings.NewReader(body[k:])))
		}
		boom := errors.New("connection reset")
		for k := range len(body) {
			if _, err := readAnswer(io.MultiReader(strings.NewReader(body[:k]), iotest.ErrReader(boom)), -1, 1<<20); !errors.Is(err, boom) {
				t.Fatalf("failing after %d bytes: %v", k, err)
			}
		}
		if _, err := readAnswer(strings.NewReader(body), -1, int64(len(body)-1)); !errors.Is(err, errTooLarge) {
			t.Fatalf("a body one byte beyond the limit: %v", err)
		}
		if _, err := readAnswer(iotest.ErrReader(boom), int64(len(body)), int64(len(body)-1)); !errors.Is(err, errTooLarge) {
			t.Fatalf("a Content-Length beyond the limit: %v, want refused before reading", err)
		}
	}
}
