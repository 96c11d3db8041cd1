// Package ocrfake is a fake MonkeyOCR server for tests: a real HTTP server
// (net/http/httptest) that speaks the v1 API of MonkeyOCR's FastAPI server
// (GET /health, POST /ocr/text|formula|table, POST /parse and the ZIP
// download of its result) with the field names, response shapes and ZIP
// layout of the real one, plus knobs that make it misbehave on purpose.
//
// What it does like the real server:
//
//   - uploads are multipart with one part named "file" that must carry a
//     filename; the file type is decided by the extension alone (.pdf .jpg
//     .jpeg .png); a missing part is 422 with FastAPI's validation body;
//   - /ocr/* failures, a bad extension included, are HTTP 200 with
//     "success":false and a message starting "OCR task failed: ";
//   - /parse failures are HTTP 500 {"detail":"Parsing failed: …"}; a
//     success carries download_url "/static/<name>_parsed_<ms>_<8hex>.zip";
//   - the ZIP holds <name>.md, <name>_content_list.json, <name>_middle.json,
//     three visualisation PDFs and images/<sha256>.jpg; only the
//     middle.json carries boxes and page sizes (integers, origin top-left);
//   - an unknown download is 404 {"detail":"Not Found"};
//   - requests to /ocr/* and /parse are served one at a time (a sync
//     backend queues, never refuses); a closed server refuses connections,
//     like a server whose model is still loading.
//
// The zero configuration answers every request successfully with a
// one-page layout (DefaultPages) and the text DefaultText.
package ocrfake

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Endpoints counted by Server.Count.
const (
	EndpointHealth   = "/health"
	EndpointText     = "/ocr/text"
	EndpointFormula  = "/ocr/formula"
	EndpointTable    = "/ocr/table"
	EndpointParse    = "/parse"
	EndpointDownload = "/static/"
)

// DefaultText is what /ocr/* answers until SetText changes it.
const DefaultText = "Hello from MonkeyOCR"

// maxUpload bounds the upload the fake reads into memory.
const maxUpload = 256 << 20

// Block is one layout block of a fake page (an entry of para_blocks).
type Block struct {
	// Type is the block type: text, title, interline_equation, image,
	// table, list, index, …
	Type string
	// BBox is written to the middle.json as given, so that tests can send
	// any arity or a degenerate box. Integral values are written as
	// integers, like the real server does.
	BBox []float64
	// Text is the content of the block's single span (text-like blocks) or
	// its caption (image and table blocks).
	Text string
}

// Page is one page of the fake layout.
type Page struct {
	// Size is the page_size [w, h] in the units of the boxes.
	Size [2]float64
	// Blocks are the para_blocks, in reading order.
	Blocks []Block
	// Discarded are the discarded_blocks (headers, footers).
	Discarded []Block
}

// DefaultPages is the layout /parse produces until SetPages changes it: one
// US-letter page with a title, a paragraph and a table.
func DefaultPages() []Page {
	return []Page{{
		Size: [2]float64{612, 792},
		Blocks: []Block{
			{Type: "title", BBox: []float64{72, 60, 540, 90}, Text: "Quarterly report"},
			{Type: "text", BBox: []float64{72, 110, 540, 300}, Text: "Revenue grew in every region."},
			{Type: "table", BBox: []float64{72, 320, 540, 600}, Text: "Table 1"},
		},
		Discarded: []Block{{Type: "discarded", BBox: []float64{72, 750, 540, 770}, Text: "page 1"}},
	}}
}

// Member is an extra entry written into the result ZIP.
type Member struct {
	// Name is written verbatim (it may be "../x", "/x" or a directory).
	Name string
	// Data is the content; when nil, Zeros bytes of zeros are written
	// instead (a compression bomb in a few kilobytes).
	Data  []byte
	Zeros int64
}

// Faults make the server misbehave. The zero value behaves.
type Faults struct {
	// TextFailure, when set, makes /ocr/* answer HTTP 200 with
	// "success":false and the message "OCR task failed: " + TextFailure.
	TextFailure string
	// TextStatus, when set, makes /ocr/* answer this HTTP status with a
	// FastAPI error body {"detail": …} instead.
	TextStatus int
	// ParseFailure, when set, makes /parse answer HTTP 500
	// {"detail":"Parsing failed: " + ParseFailure}.
	ParseFailure string
	// NoDownloadURL makes a successful /parse answer without download_url.
	NoDownloadURL bool
	// ZipNotFound makes every download answer 404 {"detail":"Not Found"},
	// as after a restart of the server.
	ZipNotFound bool
	// NoMiddleJSON leaves *_middle.json out of the ZIP.
	NoMiddleJSON bool
	// DegenerateBBox gives the first block of the first page a box with
	// x2 < x1.
	DegenerateBBox bool
	// MiddleJSON, when set, is written as the middle.json verbatim.
	MiddleJSON []byte
	// NotAZip makes the download answer bytes that are not a ZIP.
	NotAZip bool
	// ExtraMembers are added to the ZIP after the regular members.
	ExtraMembers []Member
	// Delay holds every /ocr/* and /parse request this long before it is
	// served (inside the one-at-a-time queue). Cancelled requests stop
	// waiting.
	Delay time.Duration
	// HealthDelay holds /health requests this long.
	HealthDelay time.Duration
}

// Upload is one file received by /ocr/* or /parse.
type Upload struct {
	// Endpoint is the route that received it (an Endpoint constant).
	Endpoint string
	// Filename and ContentType are those of the "file" part.
	Filename, ContentType string
	// Size is the length of the file and SHA256 its hex digest.
	Size   int
	SHA256 string
}

// Server is a running fake MonkeyOCR server. Its methods are safe for
// concurrent use.
type Server struct {
	// URL is the server root, the BASE_URL of an OCR source.
	URL string

	srv     *httptest.Server
	closing chan struct{}
	once    sync.Once
	queue   chan struct{}

	mu       sync.Mutex
	text     string
	pages    []Page
	faults   Faults
	archives map[string][]byte
	uploads  []Upload
	counts   map[string]*atomic.Int64
}

// New starts a fake server. Close it when done.
func New() *Server {
	s := &Server{
		closing:  make(chan struct{}),
		queue:    make(chan struct{}, 1),
		text:     DefaultText,
		pages:    DefaultPages(),
		archives: make(map[string][]byte),
		counts:   make(map[string]*atomic.Int64),
	}
	for _, e := range []string{EndpointHealth, EndpointText, EndpointFormula, EndpointTable, EndpointParse, EndpointDownload} {
		s.counts[e] = new(atomic.Int64)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("POST /ocr/text", func(w http.ResponseWriter, r *http.Request) { s.ocr(w, r, EndpointText, "text") })
	mux.HandleFunc("POST /ocr/formula", func(w http.ResponseWriter, r *http.Request) { s.ocr(w, r, EndpointFormula, "formula") })
	mux.HandleFunc("POST /ocr/table", func(w http.ResponseWriter, r *http.Request) { s.ocr(w, r, EndpointTable, "table") })
	mux.HandleFunc("POST /parse", s.parse)
	mux.HandleFunc("GET /static/{file}", s.download)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
	})
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	return s
}

// Close stops the server: requests in flight are abandoned, and new
// connections are refused from then on. It is idempotent.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closing)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// SetText sets what /ocr/* transcribes every upload to ("" is a valid
// answer: no text).
func (s *Server) SetText(text string) {
	s.mu.Lock()
	s.text = text
	s.mu.Unlock()
}

// SetPages sets the layout /parse produces.
func (s *Server) SetPages(pages ...Page) {
	cp := make([]Page, len(pages))
	for i, p := range pages {
		cp[i] = Page{Size: p.Size, Blocks: cloneBlocks(p.Blocks), Discarded: cloneBlocks(p.Discarded)}
	}
	s.mu.Lock()
	s.pages = cp
	s.mu.Unlock()
}

func cloneBlocks(bs []Block) []Block {
	out := make([]Block, len(bs))
	for i, b := range bs {
		out[i] = Block{Type: b.Type, BBox: slices.Clone(b.BBox), Text: b.Text}
	}
	return out
}

// SetFaults replaces the fault knobs.
func (s *Server) SetFaults(f Faults) {
	f.MiddleJSON = bytes.Clone(f.MiddleJSON)
	f.ExtraMembers = slices.Clone(f.ExtraMembers)
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
}

// Faults returns the current fault knobs.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// Count returns how many requests reached endpoint (one of the Endpoint
// constants; EndpointDownload counts every GET under /static/, found or
// not).
func (s *Server) Count(endpoint string) int {
	if c := s.counts[endpoint]; c != nil {
		return int(c.Load())
	}
	return 0
}

// Uploads returns the files received so far, in arrival order.
func (s *Server) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.uploads)
}

// ForgetArchives drops every stored result ZIP, as a restart of the real
// server does: their download URLs answer 404 from then on.
func (s *Server) ForgetArchives() {
	s.mu.Lock()
	clear(s.archives)
	s.mu.Unlock()
}

func (s *Server) state() (string, []Page, Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.text, s.pages, s.faults
}

// wait sleeps d unless the request or the server ends first.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.closing:
	}
	return false
}

// enqueue waits for the one-at-a-time slot of the model.
func (s *Server) enqueue(ctx context.Context) bool {
	select {
	case s.queue <- struct{}{}:
		return true
	case <-ctx.Done():
	case <-s.closing:
	}
	return false
}

func (s *Server) dequeue() { <-s.queue }

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	s.counts[EndpointHealth].Add(1)
	_, _, f := s.state()
	if !s.wait(r.Context(), f.HealthDelay) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "healthy", "model_loaded": true})
}

// upload reads the "file" part. ok=false means a 422 was written.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, endpoint string) (name string, data []byte, ok bool) {
	missing := func(msg string) {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []any{map[string]any{
			"type": "missing", "loc": []string{"body", "file"}, "msg": msg, "input": nil,
		}}})
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		missing("Field required")
		return "", nil, false
	}
	mr, err := r.MultipartReader()
	if err != nil {
		missing("Field required")
		return "", nil, false
	}
	for {
		p, err := mr.NextPart()
		if err != nil {
			break
		}
		if p.FormName() != "file" {
			_ = p.Close()
			continue
		}
		if p.FileName() == "" {
			_ = p.Close()
			missing("Expected UploadFile, received: <class 'str'>")
			return "", nil, false
		}
		data, err := io.ReadAll(io.LimitReader(p, maxUpload))
		ct := p.Header.Get("Content-Type")
		_ = p.Close()
		if err != nil {
			missing("Field required")
			return "", nil, false
		}
		sum := sha256.Sum256(data)
		s.mu.Lock()
		s.uploads = append(s.uploads, Upload{Endpoint: endpoint, Filename: p.FileName(), ContentType: ct, Size: len(data), SHA256: hex.EncodeToString(sum[:])})
		s.mu.Unlock()
		return p.FileName(), data, true
	}
	missing("Field required")
	return "", nil, false
}

// extOK reports whether the server accepts the extension of name, and
// returns it (lower case, with the dot).
func extOK(name string) (string, bool) {
	ext := strings.ToLower(path.Ext(name))
	switch ext {
	case ".pdf", ".jpg", ".jpeg", ".png":
		return ext, true
	}
	return ext, false
}

const allowed = ".pdf, .jpg, .jpeg, .png"

func (s *Server) ocr(w http.ResponseWriter, r *http.Request, endpoint, task string) {
	s.counts[endpoint].Add(1)
	name, _, ok := s.upload(w, r, endpoint)
	if !ok {
		return
	}
	if !s.enqueue(r.Context()) {
		return
	}
	defer s.dequeue()
	text, _, f := s.state()
	if !s.wait(r.Context(), f.Delay) {
		return
	}
	fail := func(msg string) {
		writeJSON(w, http.StatusOK, map[string]any{"success": false, "task_type": task, "content": "", "message": "OCR task failed: " + msg})
	}
	switch {
	case f.TextStatus != 0:
		writeJSON(w, f.TextStatus, map[string]any{"detail": http.StatusText(f.TextStatus)})
		return
	case f.TextFailure != "":
		fail(f.TextFailure)
		return
	}
	if ext, ok := extOK(name); !ok {
		fail(fmt.Sprintf("400: Unsupported file type: %s. Allowed: %s", ext, allowed))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"success": true, "task_type": task, "content": text,
		"message": strings.ToUpper(task[:1]) + task[1:] + " extraction completed successfully",
	})
}

func (s *Server) parse(w http.ResponseWriter, r *http.Request) {
	s.counts[EndpointParse].Add(1)
	name, _, ok := s.upload(w, r, EndpointParse)
	if !ok {
		return
	}
	if !s.enqueue(r.Context()) {
		return
	}
	defer s.dequeue()
	_, pages, f := s.state()
	if !s.wait(r.Context(), f.Delay) {
		return
	}
	fail := func(msg string) {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"detail": "Parsing failed: " + msg})
	}
	ext, ok := extOK(name)
	switch {
	case !ok:
		fail(fmt.Sprintf("400: Unsupported file type: %s. Allowed: %s", ext, allowed))
		return
	case f.ParseFailure != "":
		fail(f.ParseFailure)
		return
	}
	base := strings.TrimSuffix(name, path.Ext(name))
	archive, files, err := buildArchive(base, pages, f)
	if err != nil {
		fail(err.Error())
		return
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	zipName := fmt.Sprintf("%s_parsed_%d_%s.zip", base, time.Now().UnixMilli(), hex.EncodeToString(suffix[:]))
	s.mu.Lock()
	s.archives[zipName] = archive
	s.mu.Unlock()
	kind := "image"
	if ext == ".pdf" {
		kind = "PDF"
	}
	resp := map[string]any{
		"success":    true,
		"message":    kind + " parsing (standard) completed successfully",
		"output_dir": "/tmp/monkeyocr_parse_" + hex.EncodeToString(suffix[:]) + "/" + base,
		"files":      files,
	}
	if !f.NoDownloadURL {
		resp["download_url"] = "/static/" + zipName
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	s.counts[EndpointDownload].Add(1)
	name := r.PathValue("file")
	s.mu.Lock()
	archive, found := s.archives[name]
	f := s.faults
	s.mu.Unlock()
	if !found || f.ZipNotFound {
		writeJSON(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
		return
	}
	if f.NotAZip {
		archive = []byte("this is not a zip archive")
	}
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Length", fmt.Sprint(len(archive)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(archive)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
