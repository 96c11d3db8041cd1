package ocr_test

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/ocr"
	"github.com/polygateway/polygateway/ocr/ocrfake"
)

// The OCR invariant (docs/explanation-faults.md, row "OCR payloads"): an
// archive's directory is checked (member count, sizes) before anything is
// extracted; a payload that fails a check is invalid.
//
// TestPropertyOCRResultsAreWholeOrAnError holds ParseLayout and
// RecognizeText to it through the public API, against a local MonkeyOCR
// upstream (the protocol of ../shared/MONKEYOCR.md) whose answers are
// damaged at random from each case's own PCG seed. The damage kinds are
// dealt out by case number, so that every kind is in the run whatever the
// seed: the /parse answer cut, a byte of it replaced, "success": false, no
// or an unusable download_url, a 500, an HTML page; the ZIP download
// answering 404, an HTML page or a wrong Content-Type; the ZIP cut, a byte
// of it replaced, its *_middle.json missing, more members than MaxMembers,
// a middle.json beyond MaxMemberBytes (or exactly at it), a size in the
// central directory that lies, a count in the end record that lies, an
// unknown compression method, a flipped member name, decoys (unsafe names,
// deeper or shallower *_middle.json), a compression bomb beside the
// result, an archive beyond MaxArchiveBytes (or exactly at it, with and
// without Content-Length); the middle.json's geometry and structure broken
// (degenerate, malformed or far-outside boxes, page sizes, page_idx out of
// sequence, no pages, not JSON) or some of its bytes replaced; the
// /ocr/text answer cut, replaced, failed, unsupported, beyond
// MaxResponseBytes, or with a content of the wrong type.
//
// What each damaged payload holds is read independently (ocrOracle): the
// archive with archive/zip under the documented rules (count and declared
// size checked before anything is opened; the safe *_middle.json of least
// depth, then name; at most MaxMemberBytes inflated) and the middle.json
// with encoding/json under the checks the package documents. The call must
// return exactly that — elements, page sizes, the raw middle.json, text,
// message — or fail with the documented class (transient, ResultInvalid,
// rejected); never a partial or other result, never a panic. With a
// healthy fallback (every third case), a transient primary must yield the
// fallback's exact result, and an invalid one must end the call without
// asking the fallback ("not retried").
//
// The "memory" group bounds what is read: a *_middle.json that declares or
// actually has 16 MiB of zeros behind a 256 KiB MaxMemberBytes, a 16 MiB
// bomb beside a valid result, and a directory of 65535 entries behind
// MaxMembers 16 must each cost the call less than 4 MiB of allocation more
// than as many bytes of junk do (reading the archive itself, bounded by
// MaxArchiveBytes, is allowed). It measures the process's allocations, so
// it runs before the parallel cases, and the test itself is not parallel:
// while a sequential top-level test runs, no other test of the package
// does.
func TestPropertyOCRResultsAreWholeOrAnError(t *testing.T) {
	t.Run("memory", testOCRMemoryIsBounded)

	const seed = 0x7067_775f_6f63_72 // "pgw_ocr"
	master := rand.New(rand.NewPCG(seed, 2))
	for i := range len(layoutPlan) + textKinds {
		caseSeed := master.Uint64()
		c := newOCRCase(caseSeed, i, i >= len(layoutPlan))
		t.Run(c.title(), func(t *testing.T) {
			t.Parallel()
			c.run(t)
		})
	}
}

// --- The memory bound -------------------------------------------------

const bombSize = 16 << 20

// bomb is the raw DEFLATE stream of bombSize zero bytes, made once.
var bomb = sync.OnceValue(func() []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestSpeed)
	zeros := make([]byte, 1<<20)
	for range bombSize >> 20 {
		_, _ = w.Write(zeros)
	}
	_ = w.Close()
	return buf.Bytes()
})

var bombCRC = sync.OnceValue(func() uint32 {
	h := crc32.NewIEEE()
	zeros := make([]byte, 1<<20)
	for range bombSize >> 20 {
		_, _ = h.Write(zeros)
	}
	return h.Sum32()
})

// bombMember is the zeros, declaring size bytes.
func bombMember(name string, declared uint64) propMember {
	return propMember{name: name, raw: &zip.FileHeader{Name: name, Method: zip.Deflate, CRC32: bombCRC(),
		CompressedSize64: uint64(len(bomb())), UncompressedSize64: declared}, data: bomb()}
}

func testOCRMemoryIsBounded(t *testing.T) {
	genuine := ocrfake.MiddleJSON(ocrfake.DefaultPages())
	cfg := ocr.Config{MaxMemberBytes: 256 << 10, MaxMembers: 16}
	for _, tc := range []struct {
		name    string
		archive []byte
		ok      bool
	}{
		{"a middle.json declaring 16 MiB", propZip([]propMember{bombMember("doc_middle.json", bombSize)}), false},
		{"a middle.json declaring 1000 bytes and inflating to 16 MiB", propZip([]propMember{bombMember("doc_middle.json", 1000)}), false},
		{"a middle.json declaring 256 KiB and inflating to 16 MiB", propZip([]propMember{bombMember("doc_middle.json", 256<<10)}), false},
		{"a 16 MiB bomb beside the result", propZip([]propMember{{name: "doc_middle.json", data: genuine}, bombMember("images/bomb.jpg", bombSize)}), true},
		{"a directory of 65535 members behind MaxMembers 16", bareDirectory(0xffff), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// What reading an archive of this size costs (it is bounded by
			// MaxArchiveBytes, and allowed): the same number of bytes that
			// are no ZIP at all.
			baseline, _, _ := measureParse(t, cfg, bytes.Repeat([]byte("x"), len(tc.archive)))
			alloc, res, err := measureParse(t, cfg, tc.archive)
			if bound := baseline + 4<<20; alloc > bound {
				t.Errorf("ParseLayout allocated %d bytes for a %d-byte archive, %d for as many bytes of junk: more was inflated or listed than the limits allow (MaxMemberBytes %d, MaxMembers %d)",
					alloc, len(tc.archive), baseline, cfg.MaxMemberBytes, cfg.MaxMembers)
			}
			if tc.ok {
				if err != nil || !bytes.Equal(res.Raw, genuine) {
					t.Fatalf("ParseLayout = %v; want the genuine middle.json", err)
				}
				return
			}
			var invalid *polygateway.ResultInvalidError
			if !errors.As(err, &invalid) || !errors.Is(err, ocr.ErrBadArchive) {
				t.Fatalf("ParseLayout = %+v, %v; want a ResultInvalidError (ErrBadArchive)", res, err)
			}
		})
	}
}

// measureParse returns the bytes allocated, process-wide, by one
// ParseLayout whose result ZIP is archive.
func measureParse(t *testing.T, cfg ocr.Config, archive []byte) (uint64, *ocr.LayoutResult, error) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/parse":
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"success":true,"message":"ok","download_url":"/static/doc_parsed_1_0.zip"}`)
		case "/static/doc_parsed_1_0.zip":
			w.Header().Set("Content-Type", "application/zip")
			_, _ = w.Write(archive)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, err := ocr.FromEnvWithConfig("OCR", cfg, polygateway.WithEnv(envFor([]string{srv.URL}, nil)))
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := c.ParseLayout(ctx, pngBytes)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, res, err
}

// bareDirectory is a ZIP of n central directory entries (name "a", no
// data) and the end record announcing them: what archive/zip would list
// whole before any count is checked.
func bareDirectory(n int) []byte {
	const entry = 46 + 1
	b := make([]byte, n*entry+22)
	for i := range n {
		h := b[i*entry:]
		binary.LittleEndian.PutUint32(h, 0x02014b50)
		binary.LittleEndian.PutUint16(h[4:], 20)
		binary.LittleEndian.PutUint16(h[6:], 20)
		binary.LittleEndian.PutUint16(h[28:], 1)
		h[46] = 'a'
	}
	end := b[n*entry:]
	binary.LittleEndian.PutUint32(end, 0x06054b50)
	binary.LittleEndian.PutUint16(end[8:], uint16(n))
	binary.LittleEndian.PutUint16(end[10:], uint16(n))
	binary.LittleEndian.PutUint32(end[12:], uint32(n*entry))
	return b
}

// --- ZIP writing and patching -----------------------------------------

// propMember is one entry of a result ZIP: data compressed by method, or
// written raw under the header raw.
type propMember struct {
	name   string
	data   []byte
	method uint16
	raw    *zip.FileHeader
}

func propZip(members []propMember) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range members {
		var w io.Writer
		var err error
		if m.raw != nil {
			w, err = zw.CreateRaw(m.raw)
		} else {
			w, err = zw.CreateHeader(&zip.FileHeader{Name: m.name, Method: m.method})
		}
		if err != nil {
			panic(err)
		}
		if _, err := w.Write(m.data); err != nil {
			panic(err)
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// centralHeaders returns the offsets of the central directory headers of
// an archive written by propZip (no comment, no ZIP64) and of its end
// record.
func centralHeaders(b []byte) (offsets []int, end int) {
	end = len(b) - 22
	n := int(binary.LittleEndian.Uint16(b[end+10:]))
	off := int(binary.LittleEndian.Uint32(b[end+16:]))
	for range n {
		offsets = append(offsets, off)
		off += 46 + int(binary.LittleEndian.Uint16(b[off+28:])) + int(binary.LittleEndian.Uint16(b[off+30:])) +
			int(binary.LittleEndian.Uint16(b[off+32:]))
	}
	return offsets, end
}

func centralName(b []byte, off int) string {
	n := int(binary.LittleEndian.Uint16(b[off+28:]))
	return string(b[off+46 : off+46+n])
}

// --- Cases ------------------------------------------------------------

// propReply is one HTTP answer of the upstream.
type propReply struct {
	status      int
	contentType string
	body        []byte
	chunked     bool // no Content-Length
}

// Expectations a damage has before the oracle looks at the payload.
type ocrExpect int

const (
	ocrExpOracle       ocrExpect = iota // the oracle decides
	ocrExpMeant                         // exactly the meant result
	ocrExpMeantOrError                  // the meant result, or an error (undocumented either way)
	ocrExpInvalid                       // ResultInvalidError
	ocrExpTooLarge                      // ResultInvalidError matching ErrTooLarge
	ocrExpTransient                     // transient
	ocrExpRejected                      // RequestRejectedError
	ocrExpError                         // some error
)

type ocrCase struct {
	id       int
	seed     uint64
	text     bool // RecognizeText, else ParseLayout
	fallback bool
	basePath string
	cfg      ocr.Config
	upload   []byte

	pages          []ocrfake.Page // what the primary means (layout)
	meantText      string         // what the primary means (text)
	meantMessage   string
	fallbackPages  []ocrfake.Page
	fallbackText   string
	zipPath        string
	first, archive propReply // POST answer; ZIP download
	damage         []string
	expect         ocrExpect
	sub            int // the variant of the damage kind, -1: drawn
}

// variant returns the case's variant of a damage kind with n of them.
func (c *ocrCase) variant(r *rand.Rand, n int) int {
	if c.sub >= 0 {
		return c.sub % n
	}
	return r.IntN(n)
}

func (c *ocrCase) title() string {
	op := "layout"
	if c.text {
		op = "text"
	}
	return fmt.Sprintf("%s/case_%02d", op, c.id)
}

func (c *ocrCase) describe() string {
	op := "ParseLayout"
	if c.text {
		op = "RecognizeText"
	}
	d := "intact"
	if len(c.damage) > 0 {
		d = strings.Join(c.damage, " + ")
	}
	return fmt.Sprintf("case %d (seed %#x): %s, fallback %v, base path %q, config %+v; damage: %s",
		c.id, c.seed, op, c.fallback, c.basePath, c.cfg, d)
}

func (c *ocrCase) note(format string, args ...any) {
	c.damage = append(c.damage, fmt.Sprintf(format, args...))
}

var propTypes = []string{"text", "title", "interline_equation", "image", "table", "list", "index", "text"}
var propWords = []string{"Revenue", "grew", "in", "every", "région", "Σ", "表格", "x²", `"quoted"`, "back\\slash", "line\nbreak", "ok"}

func randWords(r *rand.Rand, n int) string {
	var w []string
	for range n {
		w = append(w, propWords[r.IntN(len(propWords))])
	}
	return strings.Join(w, " ")
}

// randCoord is an integer (as the server writes boxes) or a value with
// two decimals.
func randCoord(r *rand.Rand, lo, hi float64) float64 {
	v := lo + r.Float64()*(hi-lo)
	if r.IntN(2) == 0 {
		return math.Round(v)
	}
	return math.Round(v*100) / 100
}

func randPages(r *rand.Rand) []ocrfake.Page {
	pages := make([]ocrfake.Page, 1+r.IntN(3))
	for i := range pages {
		var w, h float64
		switch r.IntN(3) {
		case 0:
			w, h = 612, 792
		case 1:
			w, h = 595.28, 841.89
		default:
			w, h = 0.75*float64(100+r.IntN(3000)), 0.75*float64(100+r.IntN(3000))
		}
		p := ocrfake.Page{Size: [2]float64{w, h}}
		for range r.IntN(6) {
			x0, y0 := randCoord(r, -5, w*0.9), randCoord(r, -5, h*0.9)
			x1, y1 := x0+1+randCoord(r, 0, w*0.3), y0+1+randCoord(r, 0, h*0.3) // may overhang the page
			p.Blocks = append(p.Blocks, ocrfake.Block{Type: propTypes[r.IntN(len(propTypes))], BBox: []float64{x0, y0, x1, y1}, Text: randWords(r, 1+r.IntN(5))})
		}
		if r.IntN(2) == 0 {
			p.Discarded = []ocrfake.Block{{Type: "discarded", BBox: []float64{72, h - 40, w - 72, h - 20}, Text: "page " + strconv.Itoa(i+1)}}
		}
		pages[i] = p
	}
	return pages
}

// elementsOf is the layout the pages mean.
func elementsOf(pages []ocrfake.Page) ([]ocr.LayoutElement, [][2]float64) {
	els := []ocr.LayoutElement{}
	sizes := make([][2]float64, len(pages))
	for i, p := range pages {
		sizes[i] = p.Size
		for _, b := range p.Blocks {
			els = append(els, ocr.LayoutElement{Type: b.Type, BBox: [4]float64{b.BBox[0], b.BBox[1], b.BBox[2], b.BBox[3]}, PageIndex: i})
		}
	}
	return els, sizes
}

// ocrKind is a damage kind and its variant (-1: drawn).
type ocrKind struct{ kind, sub int }

// layoutPlan deals the layout damage kinds, one case each, every variant
// of the kinds that have several (see makeLayout and damageMiddle).
var layoutPlan = func() []ocrKind {
	var plan []ocrKind
	variants := map[int]int{11: 3, 13: 2, 14: 3, 18: middleDamages, 19: 3, 23: 2, 24: 4}
	for kind := range 28 {
		n, ok := variants[kind]
		if !ok {
			plan = append(plan, ocrKind{kind, -1})
			continue
		}
		for sub := range n {
			plan = append(plan, ocrKind{kind, sub})
		}
	}
	return plan
}()

const (
	textKinds     = 12
	middleDamages = 14
)

func newOCRCase(seed uint64, id int, text bool) *ocrCase {
	r := rand.New(rand.NewPCG(seed, uint64(id)))
	c := &ocrCase{id: id, seed: seed, text: text, fallback: id%3 == 2, expect: ocrExpMeant}
	if r.IntN(2) == 0 {
		c.basePath = "/gpu" + strconv.Itoa(r.IntN(4))
	}
	c.upload = [][]byte{pngBytes, jpegBytes, pdfBytes}[r.IntN(3)]
	switch r.IntN(4) {
	case 0:
		c.cfg.MaxOutsidePages = -1
	case 1:
		c.cfg.MaxOutsidePages = 0.25
	}
	c.fallbackPages = randPages(r)
	c.fallbackText = randWords(r, 1+r.IntN(8))
	if text {
		c.sub = -1
		c.makeText(r, (id-len(layoutPlan))%textKinds)
	} else {
		k := layoutPlan[id%len(layoutPlan)]
		c.sub = k.sub
		c.makeLayout(r, k.kind)
	}
	return c
}

func (c *ocrCase) makeText(r *rand.Rand, kind int) {
	c.meantText = randWords(r, r.IntN(12)) // "" is a valid transcription
	c.meantMessage = "Text extraction completed successfully"
	body, _ := json.Marshal(map[string]any{"success": true, "task_type": "text", "content": c.meantText, "message": c.meantMessage})
	c.first = propReply{status: 200, contentType: "application/json", body: body}
	switch kind {
	case 0:
	case 1:
		k := r.IntN(len(body))
		c.first.body = body[:k]
		c.note("answer cut at byte %d of %d", k, len(body))
		c.expect = ocrExpTransient
	case 2:
		k := r.IntN(len(body))
		b := bytes.Clone(body)
		b[k] = propByte(r, b[k])
		c.first.body = b
		c.note("answer byte %d %q replaced by %q", k, body[k], b[k])
		c.expect = ocrExpOracle
	case 3:
		c.first.body = []byte(`{"success":false,"task_type":"text","content":"","message":"OCR task failed: CUDA out of memory"}`)
		c.note("success false (task failed)")
		c.expect = ocrExpTransient
	case 4:
		c.first.body = []byte(`{"success":false,"task_type":"text","content":"","message":"OCR task failed: 400: Unsupported file type: .gif. Allowed: .pdf, .jpg, .jpeg, .png"}`)
		c.note("success false (unsupported file type)")
		c.expect = ocrExpRejected
	case 5:
		c.first.body = []byte(`{"task_type":"text","content":"text without a verdict"}`)
		c.note("no success member")
		c.expect = ocrExpTransient
	case 6:
		c.first.body = []byte(`{"success":true,"task_type":"text","content":null,"message":"Text extraction completed successfully"}`)
		c.note("content null")
		c.expect = ocrExpOracle
	case 7:
		c.first.body = []byte(`{"success":true,"task_type":"text","content":["not","a","string"],"message":"x"}`)
		c.note("content not a string")
		c.expect = ocrExpTransient
	case 8:
		c.first = propReply{status: 500, contentType: "application/json", body: []byte(`{"detail":"Internal Server Error"}`)}
		c.note("HTTP 500")
		c.expect = ocrExpTransient
	case 9:
		c.first = propReply{status: 200, contentType: "text/html", body: []byte("<html><body>502 Bad Gateway</body></html>")}
		c.note("an HTML page")
		c.expect = ocrExpTransient
	case 10:
		c.cfg.MaxResponseBytes = int64(len(body))
		c.note("answer exactly MaxResponseBytes")
	case 11:
		c.cfg.MaxResponseBytes = int64(len(body) - 1 - r.IntN(min(8, len(body)-1)))
		c.note("answer beyond MaxResponseBytes")
		c.expect = ocrExpTooLarge
	}
	if r.IntN(3) == 0 {
		c.first.chunked = true
	}
}

// propByte replaces b: mostly by a byte that means something in JSON or a
// ZIP header, else by any other.
func propByte(r *rand.Rand, b byte) byte {
	var c byte
	if r.IntN(2) == 0 {
		const favoured = "{}[]\",:0123456789eE.+- nt/\\PK\x00\x01\x03\x05\x06\xff"
		c = favoured[r.IntN(len(favoured))]
	} else {
		c = byte(r.IntN(256))
	}
	if c == b {
		c ^= 0x41
	}
	return c
}

func (c *ocrCase) makeLayout(r *rand.Rand, kind int) {
	c.pages = randPages(r)
	base := "image"
	if bytes.Equal(c.upload, pdfBytes) {
		base = "document"
	}
	c.zipPath = fmt.Sprintf("/static/%s_parsed_%d_%08x.zip", base, 1_700_000_000_000+r.IntN(1e9), r.Uint32())
	middle := ocrfake.MiddleJSON(c.pages)

	// The middle.json itself first.
	if kind == 18 {
		middle = c.damageMiddle(r, middle)
	}
	if kind == 19 {
		switch c.variant(r, 3) {
		case 0:
			k := r.IntN(len(middle))
			c.note("middle.json cut at byte %d of %d", k, len(middle))
			middle = middle[:k]
			c.expect = ocrExpInvalid
		case 1:
			var digits []int
			for i, b := range middle {
				if b >= '0' && b <= '9' {
					digits = append(digits, i)
				}
			}
			k := digits[r.IntN(len(digits))]
			m := bytes.Clone(middle)
			m[k] = byte('0' + (int(m[k]-'0')+1+r.IntN(9))%10)
			c.note("middle.json digit %d %q replaced by %q", k, middle[k], m[k])
			middle = m
			c.expect = ocrExpOracle
		default:
			k := r.IntN(len(middle))
			m := bytes.Clone(middle)
			m[k] = propByte(r, m[k])
			c.note("middle.json byte %d %q replaced by %q", k, middle[k], m[k])
			middle = m
			c.expect = ocrExpOracle
		}
	}

	// The members, as the real server writes them.
	method := uint16(zip.Deflate)
	if r.IntN(4) == 0 {
		method = zip.Store
	}
	members := []propMember{
		{name: base + ".md", data: []byte("# " + randWords(r, 4) + "\n\n" + randWords(r, 20)), method: method},
		{name: base + "_content_list.json", data: []byte(`[{"type":"text","text":"x","page_idx":0}]`), method: method},
		{name: base + "_middle.json", data: middle, method: method},
		{name: base + "_model.pdf", data: []byte("%PDF-1.4\n%%EOF\n"), method: method},
		{name: base + "_layout.pdf", data: []byte("%PDF-1.4\n%%EOF\n"), method: method},
		{name: base + "_spans.pdf", data: []byte("%PDF-1.4\n%%EOF\n"), method: method},
	}
	for i, p := range c.pages {
		for j, b := range p.Blocks {
			if b.Type == "image" || b.Type == "table" {
				members = append(members, propMember{name: fmt.Sprintf("images/%064x.jpg", i*100+j), data: []byte("\xff\xd8\xff\xe0fake jpeg\xff\xd9"), method: zip.Store})
			}
		}
	}
	const middleAt = 2
	decoy := ocrfake.MiddleJSON([]ocrfake.Page{{Size: [2]float64{1, 1}}})
	switch kind {
	case 12:
		members = slices.Delete(members, middleAt, middleAt+1)
		c.note("no *_middle.json in the archive")
		c.expect = ocrExpInvalid
	case 13:
		extra := 1 + r.IntN(6)
		for i := range extra {
			members = append(members, propMember{name: fmt.Sprintf("images/extra_%d.jpg", i), data: []byte("x"), method: zip.Store})
		}
		if c.variant(r, 2) == 1 {
			c.cfg.MaxMembers = len(members)
			c.note("%d members, exactly MaxMembers", len(members))
		} else {
			c.cfg.MaxMembers = len(members) - 1 - r.IntN(extra)
			c.note("%d members, more than MaxMembers %d", len(members), c.cfg.MaxMembers)
			c.expect = ocrExpTooLarge
		}
	case 14:
		switch c.variant(r, 3) {
		case 0:
			c.cfg.MaxMemberBytes = int64(len(middle) - 1 - r.IntN(64))
			c.note("middle.json of %d bytes, beyond MaxMemberBytes %d", len(middle), c.cfg.MaxMemberBytes)
			c.expect = ocrExpTooLarge
		case 1:
			c.cfg.MaxMemberBytes = int64(len(middle))
			c.note("middle.json of exactly MaxMemberBytes")
		default:
			// Padded with white space up to the limit: still the same JSON.
			limit := len(middle) + 1 + r.IntN(4096)
			c.cfg.MaxMemberBytes = int64(limit)
			members[middleAt].data = append(bytes.Clone(middle), bytes.Repeat([]byte(" "), limit-len(middle))...)
			if r.IntN(2) == 0 {
				members[middleAt].data = append(members[middleAt].data, '\n')
				c.note("middle.json padded to MaxMemberBytes + 1")
				c.expect = ocrExpTooLarge
			} else {
				c.note("middle.json padded to exactly MaxMemberBytes")
			}
		}
	case 20:
		switch r.IntN(3) {
		case 0:
			members = slices.Delete(members, 0, 2)
			c.note("no .md and no content_list.json")
		case 1:
			members[0].data = bytes.Repeat([]byte{0xff, 0x00}, 100)
			c.note("the .md is binary garbage")
		default:
			members = members[:middleAt+1]
			c.note("no visualisation PDFs or images")
		}
	case 24:
		switch c.variant(r, 4) {
		case 0:
			// Unsafe names, some of which would win by depth and name.
			for _, name := range []string{"../evil_middle.json", "/abs_middle.json", "C:/win_middle.json", "C:evil_middle.json",
				`\evil_middle.json`, `sub\back_middle.json`, "./a_middle.json", "a/../a_middle.json"} {
				at := r.IntN(len(members) + 1)
				members = slices.Insert(members, at, propMember{name: name, data: decoy})
			}
			c.note("unsafe decoy *_middle.json members")
		case 1:
			at := r.IntN(len(members) + 1)
			members = slices.Insert(members, at, propMember{name: "page_0/" + base + "_middle.json", data: decoy, method: method})
			c.note("a deeper decoy *_middle.json")
		case 2:
			members[middleAt].name = "out/" + base + "/" + base + "_middle.json"
			members = append([]propMember{{name: "out/" + base + "/"}}, members...)
			c.note("middle.json in a subdirectory")
			c.expect = ocrExpOracle
		default:
			members = append(members, propMember{name: "a_middle.json", data: decoy, method: method})
			c.note("a shallow a_middle.json that sorts first")
			c.expect = ocrExpOracle // the documented rule picks it
		}
	case 25:
		members = append(members, bombMember("images/bomb.jpg", bombSize))
		c.note("a 16 MiB bomb beside the result")
	}
	archive := propZip(members)
	offsets, end := centralHeaders(archive)
	middleHeader := -1
	for _, off := range offsets {
		if strings.HasSuffix(centralName(archive, off), "_middle.json") && !strings.Contains(centralName(archive, off), "/") && middleHeader < 0 {
			middleHeader = off
		}
	}
	patched := bytes.Clone(archive)
	switch kind {
	case 10:
		k := r.IntN(len(archive))
		archive = archive[:k]
		c.note("archive cut at byte %d of %d", k, len(patched))
		c.expect = ocrExpOracle
	case 11:
		// Anywhere, in the middle.json's own bytes, or in the directory.
		k := r.IntN(len(archive))
		switch c.variant(r, 3) {
		case 0:
			local := int(binary.LittleEndian.Uint32(archive[middleHeader+42:]))
			start := local + 30 + int(binary.LittleEndian.Uint16(archive[local+26:])) + int(binary.LittleEndian.Uint16(archive[local+28:]))
			k = local + r.IntN(start-local+int(binary.LittleEndian.Uint32(archive[middleHeader+20:])))
		case 1:
			k = offsets[0] + r.IntN(len(archive)-offsets[0])
		}
		patched[k] = propByte(r, archive[k])
		c.note("archive byte %d %#x replaced by %#x", k, archive[k], patched[k])
		archive = patched
		c.expect = ocrExpOracle
	case 15:
		declared := binary.LittleEndian.Uint32(archive[middleHeader+24:])
		lie := []uint32{declared - 1 - uint32(r.IntN(int(min(declared-1, 50)))), declared + 1 + uint32(r.IntN(50)), 0, math.MaxUint32 - 1}[r.IntN(4)]
		binary.LittleEndian.PutUint32(patched[middleHeader+24:], lie)
		c.note("middle.json declares %d bytes, has %d", lie, declared)
		archive = patched
		c.expect = ocrExpInvalid
	case 16:
		n := binary.LittleEndian.Uint16(archive[end+10:])
		lie := []uint16{n + 1, n - 1, n + 4096, 0xfffe}[r.IntN(4)]
		binary.LittleEndian.PutUint16(patched[end+8:], lie)
		binary.LittleEndian.PutUint16(patched[end+10:], lie)
		c.note("end record announces %d members, has %d", lie, n)
		archive = patched
		c.expect = ocrExpInvalid
	case 17:
		binary.LittleEndian.PutUint16(patched[middleHeader+10:], 99)
		c.note("middle.json compressed by unknown method 99")
		archive = patched
		c.expect = ocrExpInvalid
	case 26:
		n := int(binary.LittleEndian.Uint16(archive[middleHeader+28:]))
		k := middleHeader + 46 + r.IntN(n)
		patched[k] = []byte("/._-xM.\\:")[r.IntN(9)]
		if patched[k] == archive[k] {
			patched[k] = '~'
		}
		c.note("middle.json's name in the directory now %q", centralName(patched, middleHeader))
		archive = patched
		c.expect = ocrExpOracle
	}

	// The /parse answer.
	files := make([]string, 0, len(members))
	for _, m := range members {
		files = append(files, m.name)
	}
	first, _ := json.Marshal(map[string]any{
		"success": true, "message": "PDF parsing (standard) completed successfully",
		"output_dir": "/tmp/monkeyocr_parse_1a2b3c4d/" + base, "files": files, "download_url": c.zipPath,
	})
	c.first = propReply{status: 200, contentType: "application/json", body: first}
	c.archive = propReply{status: 200, contentType: "application/zip", body: archive, chunked: r.IntN(3) == 0}
	switch kind {
	case 1:
		k := r.IntN(len(first))
		c.first.body = first[:k]
		c.note("/parse answer cut at byte %d of %d", k, len(first))
		c.expect = ocrExpTransient
	case 2:
		k := r.IntN(len(first))
		b := bytes.Clone(first)
		b[k] = propByte(r, b[k])
		c.first.body = b
		c.note("/parse answer byte %d %q replaced by %q", k, first[k], b[k])
		c.expect = ocrExpOracle
	case 3:
		c.first.body = []byte(`{"success":false,"message":"OCR task failed: CUDA out of memory"}`)
		c.note("/parse success false")
		c.expect = ocrExpTransient
	case 4:
		c.first.body = []byte(`{"success":true,"message":"PDF parsing (standard) completed successfully","files":[]}`)
		c.note("/parse answer without download_url")
		c.expect = ocrExpInvalid
	case 5:
		c.first = propReply{status: 500, contentType: "application/json", body: []byte(`{"detail":"Parsing failed: worker crashed"}`)}
		c.note("/parse HTTP 500")
		c.expect = ocrExpTransient
	case 6:
		c.first = propReply{status: 200, contentType: "text/html", body: []byte("<html>maintenance</html>")}
		c.note("/parse answers an HTML page")
		c.expect = ocrExpTransient
	case 7:
		dl := []string{"../static/x.zip", "http://evil.example" + c.zipPath, "//evil.example" + c.zipPath, `\static\x.zip`, "/static/../etc/passwd", "/static//x.zip", "static/x.zip"}[r.IntN(7)]
		c.first.body = bytes.Replace(first, []byte(`"`+c.zipPath+`"`), must(json.Marshal(dl)), 1)
		c.note("download_url %q unusable", dl)
		c.expect = ocrExpInvalid
	case 8:
		dl := strings.Replace(c.zipPath, ".zip", "_gone.zip", 1)
		c.first.body = bytes.Replace(first, []byte(c.zipPath), []byte(dl), 1)
		c.note("download_url names an archive that is not there")
		c.expect = ocrExpTransient
	case 9:
		c.archive = propReply{status: 404, contentType: "application/json", body: []byte(`{"detail":"Not Found"}`)}
		c.note("ZIP download 404")
		c.expect = ocrExpTransient
	case 21:
		c.archive.contentType = []string{"text/html", "application/json", "", "application/octet-stream"}[r.IntN(4)]
		c.note("ZIP served as Content-Type %q", c.archive.contentType)
		c.expect = ocrExpMeantOrError
	case 22:
		c.archive = propReply{status: 200, contentType: "text/html", body: []byte("<html><body>Login required</body></html>")}
		c.note("an HTML page instead of the ZIP")
		c.expect = ocrExpInvalid
	case 23:
		if c.variant(r, 2) == 1 {
			c.cfg.MaxArchiveBytes = int64(len(archive))
			c.note("archive of exactly MaxArchiveBytes (chunked %v)", c.archive.chunked)
		} else {
			c.cfg.MaxArchiveBytes = int64(len(archive) - 1 - r.IntN(100))
			c.note("archive of %d bytes, beyond MaxArchiveBytes %d (chunked %v)", len(archive), c.cfg.MaxArchiveBytes, c.archive.chunked)
			c.expect = ocrExpTooLarge
		}
	case 27:
		// Reordered members: the middle.json first or last.
		c.note("members in another order")
		slices.Reverse(members)
		c.archive.body = propZip(members)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// damageMiddle breaks the structure or geometry of a middle.json, or
// changes it harmlessly, and records what it did.
func (c *ocrCase) damageMiddle(r *rand.Rand, middle []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(middle))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		panic(err)
	}
	pages := doc["pdf_info"].([]any)
	pi := r.IntN(len(pages))
	page := pages[pi].(map[string]any)
	blocks, _ := page["para_blocks"].([]any)
	if len(blocks) == 0 {
		// A block to damage: a valid one first, the damage below.
		size := c.pages[pi].Size
		b := ocrfake.Block{Type: "text", BBox: []float64{1, 1, math.Max(2, size[0]/2), math.Max(2, size[1]/2)}, Text: "added"}
		c.pages[pi].Blocks = append(c.pages[pi].Blocks, b)
		blocks = []any{map[string]any{"type": "text", "bbox": []any{json.Number("1"), json.Number("1"),
			jsonNum(b.BBox[2]), jsonNum(b.BBox[3])}, "index": 0}}
		page["para_blocks"] = blocks
	}
	bi := r.IntN(len(blocks))
	block := blocks[bi].(map[string]any)
	bbox := block["bbox"].([]any)
	w, h := c.pages[pi].Size[0], c.pages[pi].Size[1]
	c.expect = ocrExpInvalid
	v := c.variant(r, middleDamages)
	switch v {
	case 0:
		if r.IntN(2) == 0 {
			bbox[0], bbox[2] = bbox[2], bbox[0]
		} else {
			bbox[3] = bbox[1]
		}
		c.note("page %d block %d has a degenerate bbox %v", pi, bi, bbox)
	case 1:
		v := []any{json.Number(strconv.Itoa(pi + 1)), json.Number("-1"), json.Number(strconv.Itoa(pi) + ".5")}[r.IntN(3)]
		if r.IntN(4) == 0 {
			v = strconv.Itoa(pi) // a string: not an index at all
		}
		page["page_idx"] = v
		c.note("page %d has page_idx %#v", pi, v)
	case 2:
		if r.IntN(2) == 0 {
			page["page_idx"] = nil
			c.note("page %d has page_idx null", pi)
		} else {
			delete(page, "page_idx")
			c.note("page %d has no page_idx", pi)
		}
		c.expect = ocrExpMeant
	case 3:
		v := []any{[]any{json.Number("0"), jsonNum(h)}, []any{jsonNum(w), json.Number("-1")}, []any{jsonNum(-w), jsonNum(h)}}[r.IntN(3)]
		page["page_size"] = v
		c.cfg.MaxOutsidePages = -1 // the boxes must not give it away
		c.note("page %d has page_size %v (far-outside check off)", pi, v)
	case 13:
		v := []any{[]any{jsonNum(w)}, []any{jsonNum(w), jsonNum(h), json.Number("1")}, "612x792", []any{nil, jsonNum(h)},
			[]any{json.Number("1e400"), jsonNum(h)}, map[string]any{}}[r.IntN(6)]
		page["page_size"] = v
		c.note("page %d has page_size %v", pi, v)
	case 4:
		if r.IntN(5) == 0 {
			delete(page, "page_size")
			c.note("page %d has no page_size", pi)
			break
		}
		v := []any{bbox[:3], []any{bbox[0], nil, bbox[2], bbox[3]}, "1,2,3,4", []any{bbox[0], bbox[1], bbox[2], bbox[3].(json.Number).String()},
			[]any{bbox[0], bbox[1], json.Number("1e999"), bbox[3]}}[r.IntN(5)]
		block["bbox"] = v
		c.note("page %d block %d has bbox %v", pi, bi, v)
	case 5, 12:
		// Far outside: beyond the page grown by MaxOutsidePages pages
		// (the default 1, or 0.25), or with the check off (variant 12).
		c.cfg.MaxOutsidePages = []float64{0, 0.25}[r.IntN(2)]
		m := effective(c.cfg).MaxOutsidePages
		x := w*(1+m) + 10 + float64(r.IntN(100))
		bbox[0], bbox[2] = jsonNum(x), jsonNum(x+5)
		if v == 12 {
			c.cfg.MaxOutsidePages = -1
			c.expect = ocrExpOracle // kept: geometry beyond the page is the caller's
		}
		c.note("page %d block %d lies far outside the page (x %v; MaxOutsidePages %v)", pi, bi, x, c.cfg.MaxOutsidePages)
	case 6:
		v := []any{json.Number("42"), true, map[string]any{}, nil}[r.IntN(4)]
		block["type"] = v
		c.note("page %d block %d has type %#v", pi, bi, v)
		c.expect = ocrExpOracle // null reads as ""
	case 7:
		v := []any{[]any{}, nil, map[string]any{}, "pages"}[r.IntN(4)]
		doc["pdf_info"] = v
		c.note("pdf_info is %#v", v)
	case 8:
		delete(doc, "pdf_info")
		c.note("no pdf_info")
	case 9:
		if r.IntN(2) == 0 {
			blocks[bi] = nil
			c.note("page %d block %d is null", pi, bi)
		} else {
			page["para_blocks"] = nil
			c.note("page %d para_blocks null", pi)
			c.expect = ocrExpOracle
		}
	case 10:
		c.note("middle.json replaced by the markdown")
		return []byte("# Quarterly report\n\nRevenue grew in every region.\n")
	case 11:
		doc["_extra"] = map[string]any{"note": randWords(r, 3)}
		page["discarded_blocks"] = []any{map[string]any{"type": "discarded", "bbox": []any{json.Number("-9"), json.Number("9"), json.Number("1"), json.Number("1")}}}
		c.note("unknown members and a broken discarded block")
		c.expect = ocrExpMeant
	}
	out, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return out
}

func jsonNum(f float64) json.Number { return json.Number(strconv.FormatFloat(f, 'g', -1, 64)) }

// --- The oracle -------------------------------------------------------

type ocrVerdict int

const (
	ocrValid ocrVerdict = iota
	ocrTransient
	ocrInvalid
	ocrRejected
	ocrSomeError // an error whose class the oracle does not decide
)

func (v ocrVerdict) String() string {
	return [...]string{"valid", "transient", "invalid (ResultInvalidError)", "rejected", "an error"}[v]
}

// ocrWant is what the oracle reads from the payload.
type ocrWant struct {
	verdict  ocrVerdict
	why      string
	tooLarge bool
	elements []ocr.LayoutElement
	sizes    [][2]float64
	raw      []byte
	text     string
	message  string
}

func wantErr(v ocrVerdict, format string, args ...any) ocrWant {
	return ocrWant{verdict: v, why: fmt.Sprintf(format, args...)}
}

// effective returns cfg with the documented defaults of its zero fields.
func effective(cfg ocr.Config) ocr.Config {
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = ocr.DefaultMaxResponseBytes
	}
	if cfg.MaxArchiveBytes <= 0 {
		cfg.MaxArchiveBytes = ocr.DefaultMaxArchiveBytes
	}
	if cfg.MaxMemberBytes <= 0 {
		cfg.MaxMemberBytes = ocr.DefaultMaxMemberBytes
	}
	if cfg.MaxMembers <= 0 {
		cfg.MaxMembers = ocr.DefaultMaxMembers
	}
	if cfg.MaxOutsidePages == 0 {
		cfg.MaxOutsidePages = ocr.DefaultMaxOutsidePages
	}
	return cfg
}

func unsupported(msg string) bool {
	return strings.Contains(strings.ToLower(msg), "unsupported file type")
}

// ocrOracle reads what the upstream's payload holds, by the protocol and
// the package's documented checks.
func (c *ocrCase) ocrOracle() ocrWant {
	cfg := effective(c.cfg)
	first := c.first
	if first.status < 200 || first.status > 299 {
		var e struct {
			Detail any `json:"detail"`
		}
		if json.Unmarshal(first.body, &e) == nil {
			if s, ok := e.Detail.(string); ok && unsupported(s) {
				return wantErr(ocrRejected, "HTTP %d: %s", first.status, s)
			}
		}
		return wantErr(ocrTransient, "HTTP %d", first.status)
	}
	if int64(len(first.body)) > cfg.MaxResponseBytes {
		return ocrWant{verdict: ocrInvalid, tooLarge: true, why: "answer beyond MaxResponseBytes"}
	}
	var ans struct {
		Success     *bool   `json:"success"`
		Content     *string `json:"content"`
		Message     *string `json:"message"`
		DownloadURL *string `json:"download_url"`
	}
	if err := json.Unmarshal(first.body, &ans); err != nil || ans.Success == nil {
		return wantErr(ocrTransient, "the answer is not the protocol's JSON: %v", err)
	}
	deref := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	if !*ans.Success {
		if unsupported(deref(ans.Message)) {
			return wantErr(ocrRejected, "unsupported file type")
		}
		return wantErr(ocrTransient, "success false")
	}
	if c.text {
		return ocrWant{verdict: ocrValid, text: deref(ans.Content), message: deref(ans.Message), raw: first.body}
	}
	dl := strings.TrimSpace(deref(ans.DownloadURL))
	switch {
	case dl == "":
		return wantErr(ocrInvalid, "no download_url")
	case dl != c.zipPath:
		return downloadOracle(dl)
	}

	arc := c.archive
	switch {
	case arc.status == 404 || arc.status == 410:
		return wantErr(ocrTransient, "archive gone")
	case arc.status < 200 || arc.status > 299:
		return wantErr(ocrSomeError, "download HTTP %d", arc.status)
	case int64(len(arc.body)) > cfg.MaxArchiveBytes:
		return ocrWant{verdict: ocrInvalid, tooLarge: true, why: "archive beyond MaxArchiveBytes"}
	}
	zr, err := zip.NewReader(bytes.NewReader(arc.body), int64(len(arc.body)))
	if err != nil && (!errors.Is(err, zip.ErrInsecurePath) || zr == nil) {
		return wantErr(ocrInvalid, "not a ZIP: %v", err)
	}
	if len(zr.File) > cfg.MaxMembers {
		return ocrWant{verdict: ocrInvalid, tooLarge: true, why: fmt.Sprintf("%d members", len(zr.File))}
	}
	var best *zip.File
	for _, f := range zr.File {
		name := f.Name
		if !oracleSafe(name) || strings.HasSuffix(name, "/") {
			continue
		}
		if b := path.Base(name); !strings.HasSuffix(b, "_middle.json") && b != "middle.json" {
			continue
		}
		if best == nil || strings.Count(name, "/") < strings.Count(best.Name, "/") ||
			strings.Count(name, "/") == strings.Count(best.Name, "/") && name < best.Name {
			best = f
		}
	}
	if best == nil {
		return wantErr(ocrInvalid, "no *_middle.json")
	}
	if best.UncompressedSize64 > uint64(cfg.MaxMemberBytes) {
		return ocrWant{verdict: ocrInvalid, tooLarge: true, why: fmt.Sprintf("%s declares %d bytes", best.Name, best.UncompressedSize64)}
	}
	rc, err := best.Open()
	if err != nil {
		return wantErr(ocrInvalid, "cannot open %s: %v", best.Name, err)
	}
	data, err := io.ReadAll(io.LimitReader(rc, cfg.MaxMemberBytes+1))
	_ = rc.Close()
	if int64(len(data)) > cfg.MaxMemberBytes {
		return ocrWant{verdict: ocrInvalid, tooLarge: true, why: "middle.json inflates beyond the limit"}
	}
	if err != nil {
		return wantErr(ocrInvalid, "cannot read %s: %v", best.Name, err)
	}
	return oracleMiddle(data, cfg.MaxOutsidePages)
}

// downloadOracle judges a download_url other than the archive's, by the
// documented resolution: relative to the source (never another host), "."
// and ".." segments, empty segments and backslashes refused (invalid); a
// usable path the server does not serve is a 404 (transient).
func downloadOracle(dl string) ocrWant {
	if strings.Contains(dl, "\\") || strings.HasPrefix(dl, "//") {
		return wantErr(ocrInvalid, "download_url %q unusable", dl)
	}
	if !strings.HasPrefix(dl, "/") {
		// Only an absolute URL of the source's own scheme and host is
		// usable; the sources listen on 127.0.0.1.
		if u, err := url.Parse(dl); err == nil && u.IsAbs() && strings.HasPrefix(u.Host, "127.0.0.1") {
			return wantErr(ocrSomeError, "download_url %q", dl)
		}
		return wantErr(ocrInvalid, "download_url %q is neither a path nor a URL of the source", dl)
	}
	for _, seg := range strings.Split(dl[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return wantErr(ocrInvalid, "download_url %q has a segment %q", dl, seg)
		}
	}
	return wantErr(ocrTransient, "download_url %q is not served: 404", dl)
}

// oracleSafe: a plain relative path (no leading slash, drive letter,
// backslash, NUL, "." or ".." element).
func oracleSafe(name string) bool {
	if name == "" || strings.ContainsAny(name, "\\\x00") || len(name) >= 2 && name[1] == ':' {
		return false
	}
	return fs.ValidPath(strings.TrimSuffix(name, "/"))
}

// oracleMiddle reads a middle.json: one entry of pdf_info per page, in
// order; page_idx, when given, the page's position; page_size two positive
// finite numbers; para_blocks' bbox four finite numbers with x2 > x1 and
// y2 > y1 that meet the page grown by maxOutside pages (unless negative).
func oracleMiddle(data []byte, maxOutside float64) ocrWant {
	var doc struct {
		PdfInfo *[]json.RawMessage `json:"pdf_info"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return wantErr(ocrInvalid, "middle.json: %v", err)
	}
	if doc.PdfInfo == nil || len(*doc.PdfInfo) == 0 {
		return wantErr(ocrInvalid, "no pages")
	}
	out := ocrWant{verdict: ocrValid, raw: data, elements: []ocr.LayoutElement{}}
	for i, raw := range *doc.PdfInfo {
		var pg struct {
			PageIdx    *float64   `json:"page_idx"`
			PageSize   []*float64 `json:"page_size"`
			ParaBlocks []struct {
				Type *string    `json:"type"`
				BBox []*float64 `json:"bbox"`
			} `json:"para_blocks"`
		}
		if err := json.Unmarshal(raw, &pg); err != nil {
			return wantErr(ocrInvalid, "page %d: %v", i, err)
		}
		if pg.PageIdx != nil && *pg.PageIdx != float64(i) {
			return wantErr(ocrInvalid, "page %d has page_idx %v", i, *pg.PageIdx)
		}
		if len(pg.PageSize) != 2 || pg.PageSize[0] == nil || pg.PageSize[1] == nil || !(*pg.PageSize[0] > 0 && *pg.PageSize[1] > 0) {
			return wantErr(ocrInvalid, "page %d: page_size", i)
		}
		w, h := *pg.PageSize[0], *pg.PageSize[1]
		out.sizes = append(out.sizes, [2]float64{w, h})
		for j, b := range pg.ParaBlocks {
			if len(b.BBox) != 4 || slices.Contains(b.BBox, nil) {
				return wantErr(ocrInvalid, "page %d block %d: bbox", i, j)
			}
			v := [4]float64{*b.BBox[0], *b.BBox[1], *b.BBox[2], *b.BBox[3]}
			if !(v[2] > v[0] && v[3] > v[1]) {
				return wantErr(ocrInvalid, "page %d block %d: degenerate %v", i, j, v)
			}
			if maxOutside >= 0 {
				mw, mh := maxOutside*w, maxOutside*h
				if v[2] < -mw || v[0] > w+mw || v[3] < -mh || v[1] > h+mh {
					return wantErr(ocrInvalid, "page %d block %d: far outside %v", i, j, v)
				}
			}
			typ := ""
			if b.Type != nil {
				typ = *b.Type
			}
			out.elements = append(out.elements, ocr.LayoutElement{Type: typ, BBox: v, PageIndex: i})
		}
	}
	return out
}

// --- Running a case ---------------------------------------------------

func (c *ocrCase) serve(w http.ResponseWriter, r *http.Request) {
	p, ok := strings.CutPrefix(r.URL.Path, c.basePath)
	_, _ = io.Copy(io.Discard, r.Body)
	switch {
	case ok && r.Method == http.MethodPost && (p == "/parse" && !c.text || p == "/ocr/text" && c.text):
		writeReply(w, c.first)
	case ok && r.Method == http.MethodGet && !c.text && p == c.zipPath:
		writeReply(w, c.archive)
	default:
		writeReply(w, propReply{status: 404, contentType: "application/json", body: []byte(`{"detail":"Not Found"}`)})
	}
}

func writeReply(w http.ResponseWriter, rep propReply) {
	if rep.contentType != "" {
		w.Header().Set("Content-Type", rep.contentType)
	} else {
		w.Header()["Content-Type"] = nil // no sniffing either
	}
	if rep.chunked {
		w.WriteHeader(rep.status)
		w.(http.Flusher).Flush()
	} else {
		w.Header().Set("Content-Length", strconv.Itoa(len(rep.body)))
		w.WriteHeader(rep.status)
	}
	_, _ = w.Write(rep.body)
}

func (c *ocrCase) run(t *testing.T) {
	desc := c.describe()
	want := c.ocrOracle()
	if bad := c.oracleDisagrees(want); bad != "" {
		t.Fatalf("test bug: the oracle disagrees with the damage: %s (oracle: %s, %s)\n%s", bad, want.verdict, want.why, desc)
	}

	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	targets := []string{srv.URL + c.basePath}
	var fb *ocrfake.Server
	if c.fallback {
		fb = ocrfake.New()
		t.Cleanup(fb.Close)
		fb.SetPages(c.fallbackPages...)
		fb.SetText(c.fallbackText)
		targets = append(targets, fb.URL)
	}
	client := newClient(t, c.cfg, map[string]string{"OCR__RETRY__BACKOFF_BASE_S": "0.005", "OCR__RETRY__BACKOFF_MAX_S": "0.02"}, targets)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var (
		got ocrWant
		src string
		err error
	)
	if c.text {
		var res *ocr.TextResult
		res, err = client.RecognizeText(ctx, c.upload)
		if err == nil {
			got = ocrWant{text: res.Text, message: res.Message, raw: res.Raw}
			src = res.SourceName
		}
	} else {
		var res *ocr.LayoutResult
		res, err = client.ParseLayout(ctx, c.upload)
		if err == nil {
			got = ocrWant{elements: res.Elements, sizes: res.PageSizes, raw: res.Raw}
			src = res.SourceName
			if limit := effective(c.cfg).MaxMemberBytes; int64(len(res.Raw)) > limit {
				t.Errorf("Raw holds %d bytes, more than MaxMemberBytes %d\n%s", len(res.Raw), limit, desc)
			}
		}
	}

	// The fallback's own answer, for a primary that fails over.
	var fbWant ocrWant
	if c.fallback {
		els, sizes := elementsOf(c.fallbackPages)
		fbWant = ocrWant{elements: els, sizes: sizes, raw: ocrfake.MiddleJSON(c.fallbackPages)}
		if c.text {
			fbWant = ocrWant{text: c.fallbackText, message: "Text extraction completed successfully"}
		}
	}
	isFallback := func() bool { return err == nil && src == "monkey_2" && c.sameResult(got, fbWant) == "" }

	switch want.verdict {
	case ocrValid:
		if c.expect == ocrExpMeantOrError && err != nil {
			if !errors.Is(err, polygateway.ErrGateway) {
				t.Errorf("err = %v, not a polygateway error\n%s", err, desc)
			}
			return
		}
		if err != nil {
			t.Fatalf("the call failed, but the payload holds a whole result (oracle): %v\n%s", err, desc)
		}
		if d := c.sameResult(got, want); d != "" || src != "monkey_1" {
			t.Fatalf("the call returned another result than the payload holds: %s (source %s)\n%s", d, src, desc)
		}
	case ocrTransient:
		if c.fallback {
			if !isFallback() {
				t.Fatalf("a transient primary (%s) must yield the fallback's exact result; got %v from %q (%s)\n%s",
					want.why, err, src, c.sameResult(got, fbWant), desc)
			}
			return
		}
		var invalid *polygateway.ResultInvalidError
		var transient *polygateway.TransientError
		if err == nil || errors.As(err, &invalid) || !errors.As(err, &transient) {
			t.Fatalf("got %s, %v; want a transient failure (%s)\n%s", c.show(got, err), err, want.why, desc)
		}
	case ocrInvalid:
		var invalid *polygateway.ResultInvalidError
		if err == nil || !errors.As(err, &invalid) {
			t.Fatalf("got %s from %q, %v; want a ResultInvalidError (%s)\n%s", c.show(got, err), src, err, want.why, desc)
		}
		if !errors.Is(err, ocr.ErrBadArchive) && !errors.Is(err, ocr.ErrBadLayout) && !errors.Is(err, ocr.ErrBadGeometry) && !errors.Is(err, ocr.ErrTooLarge) {
			t.Errorf("err = %v, matches none of ErrBadArchive, ErrBadLayout, ErrBadGeometry, ErrTooLarge\n%s", err, desc)
		}
		if want.tooLarge && !errors.Is(err, ocr.ErrTooLarge) {
			t.Errorf("err = %v, want it to match ErrTooLarge (%s)\n%s", err, want.why, desc)
		}
		if fb != nil {
			if n := fb.Count(ocrfake.EndpointParse) + fb.Count(ocrfake.EndpointText); n != 0 {
				t.Errorf("the fallback was asked %d times after an invalid result, which is not retried\n%s", n, desc)
			}
		}
	case ocrRejected:
		var rejected *polygateway.RequestRejectedError
		if err == nil || !errors.As(err, &rejected) {
			t.Fatalf("got %s, %v; want a RequestRejectedError (%s)\n%s", c.show(got, err), err, want.why, desc)
		}
	case ocrSomeError:
		if err == nil && (!c.fallback || !isFallback()) {
			t.Fatalf("got %s from %q; want an error (%s)\n%s", c.show(got, err), src, want.why, desc)
		}
	}
}

// oracleDisagrees holds the oracle to what a damage is known to do; ""
// when they agree.
func (c *ocrCase) oracleDisagrees(w ocrWant) string {
	meant := func() string {
		if w.verdict != ocrValid {
			return "want the meant result, oracle says " + w.verdict.String()
		}
		var m ocrWant
		if c.text {
			m = ocrWant{text: c.meantText, message: c.meantMessage, raw: w.raw}
		} else {
			m.elements, m.sizes = elementsOf(c.pages)
			m.raw = w.raw
		}
		return c.sameResult(w, m)
	}
	switch c.expect {
	case ocrExpMeant, ocrExpMeantOrError:
		return meant()
	case ocrExpInvalid:
		if w.verdict != ocrInvalid {
			return "want invalid, oracle says " + w.verdict.String()
		}
	case ocrExpTooLarge:
		if w.verdict != ocrInvalid || !w.tooLarge {
			return "want invalid (too large), oracle says " + w.verdict.String()
		}
	case ocrExpTransient:
		if w.verdict != ocrTransient {
			return "want transient, oracle says " + w.verdict.String()
		}
	case ocrExpRejected:
		if w.verdict != ocrRejected {
			return "want rejected, oracle says " + w.verdict.String()
		}
	case ocrExpError:
		if w.verdict == ocrValid {
			return "want an error, oracle says valid"
		}
	}
	return ""
}

// show describes what a call returned, for failure messages.
func (c *ocrCase) show(got ocrWant, err error) string {
	switch {
	case err != nil:
		return "no result"
	case c.text:
		return fmt.Sprintf("the text %q (message %q)", got.text, got.message)
	}
	return fmt.Sprintf("a layout of %d pages %v and %d elements %v from a middle.json of %d bytes", len(got.sizes), got.sizes, len(got.elements), got.elements, len(got.raw))
}

// sameResult compares results; "" when equal.
func (c *ocrCase) sameResult(got, want ocrWant) string {
	if c.text {
		if got.text != want.text || got.message != want.message {
			return fmt.Sprintf("text %q message %q, want %q, %q", got.text, got.message, want.text, want.message)
		}
		if want.raw != nil && !bytes.Equal(got.raw, want.raw) {
			return fmt.Sprintf("raw %.200q, want %.200q", got.raw, want.raw)
		}
		return ""
	}
	if len(got.elements) != len(want.elements) {
		return fmt.Sprintf("%d elements, want %d: %v, want %v", len(got.elements), len(want.elements), got.elements, want.elements)
	}
	for i := range want.elements {
		if got.elements[i] != want.elements[i] {
			return fmt.Sprintf("element %d is %+v, want %+v", i, got.elements[i], want.elements[i])
		}
	}
	if !slices.Equal(got.sizes, want.sizes) {
		return fmt.Sprintf("page sizes %v, want %v", got.sizes, want.sizes)
	}
	if !bytes.Equal(got.raw, want.raw) {
		return fmt.Sprintf("raw middle.json of %d bytes, want the %d bytes of the chosen member", len(got.raw), len(want.raw))
	}
	return ""
}
