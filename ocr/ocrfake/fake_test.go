package ocrfake_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/ocr/ocrfake"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// client is a plain HTTP client whose connections are closed per test.
func client(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// upload posts one multipart part; filename "" sends a plain form field,
// field "" sends no part at all.
func upload(t *testing.T, c *http.Client, url, field, filename string, data []byte) (int, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	switch {
	case field == "":
	case filename == "":
		_ = w.WriteField(field, string(data))
	default:
		p, _ := w.CreateFormFile(field, filename)
		_, _ = p.Write(data)
	}
	_ = w.Close()
	resp, err := c.Post(url, w.FormDataContentType(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("answer is not a JSON object: %v", err)
	}
	return resp.StatusCode, v
}

func get(t *testing.T, c *http.Client, url string) (int, []byte) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestHealth(t *testing.T) {
	t.Parallel()
	s := ocrfake.New()
	defer s.Close()
	status, body := get(t, client(t), s.URL+"/health")
	if status != 200 || string(body) != `{"model_loaded":true,"status":"healthy"}` {
		t.Errorf("GET /health = %d %s", status, body)
	}
	if s.Count(ocrfake.EndpointHealth) != 1 {
		t.Errorf("health count = %d", s.Count(ocrfake.EndpointHealth))
	}
}

func TestOCREndpoints(t *testing.T) {
	t.Parallel()
	s := ocrfake.New()
	defer s.Close()
	c := client(t)

	status, v := upload(t, c, s.URL+"/ocr/text", "file", "scan.png", []byte("png"))
	if status != 200 || v["success"] != true || v["task_type"] != "text" || v["content"] != ocrfake.DefaultText {
		t.Errorf("/ocr/text = %d %v", status, v)
	}
	status, v = upload(t, c, s.URL+"/ocr/formula", "file", "f.JPEG", []byte("jpg"))
	if status != 200 || v["success"] != true || v["task_type"] != "formula" {
		t.Errorf("/ocr/formula = %d %v", status, v)
	}
	status, v = upload(t, c, s.URL+"/ocr/table", "file", "scan.gif", []byte("gif"))
	if status != 200 || v["success"] != false || v["message"] != "OCR task failed: 400: Unsupported file type: .gif. Allowed: .pdf, .jpg, .jpeg, .png" {
		t.Errorf("/ocr/table with .gif = %d %v", status, v)
	}
	for _, tc := range []struct{ field, filename string }{{"", ""}, {"file", ""}, {"other", "x.png"}} {
		status, v = upload(t, c, s.URL+"/ocr/text", tc.field, tc.filename, []byte("x"))
		if status != 422 || v["detail"] == nil {
			t.Errorf("/ocr/text with part %q filename %q = %d %v, want 422", tc.field, tc.filename, status, v)
		}
	}
	s.SetFaults(ocrfake.Faults{TextFailure: "boom"})
	status, v = upload(t, c, s.URL+"/ocr/text", "file", "scan.png", []byte("png"))
	if status != 200 || v["success"] != false || v["message"] != "OCR task failed: boom" || v["content"] != "" {
		t.Errorf("TextFailure: %d %v", status, v)
	}
	if n := s.Count(ocrfake.EndpointText); n != 5 {
		t.Errorf("text count = %d, want 5", n)
	}
	if up := s.Uploads(); len(up) != 4 || up[0].Filename != "scan.png" || up[0].Size != 3 {
		t.Errorf("uploads = %+v", up)
	}
}

func TestParseAndDownload(t *testing.T) {
	t.Parallel()
	s := ocrfake.New()
	defer s.Close()
	c := client(t)

	status, v := upload(t, c, s.URL+"/parse", "file", "report.pdf", []byte("%PDF-"))
	dl, _ := v["download_url"].(string)
	if status != 200 || v["success"] != true || !regexp.MustCompile(`^/static/report_parsed_\d+_[0-9a-f]{8}\.zip$`).MatchString(dl) {
		t.Fatalf("/parse = %d %v", status, v)
	}
	status, archive := get(t, c, s.URL+dl)
	if status != 200 {
		t.Fatalf("download = %d", status)
	}
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	members := map[string][]byte{}
	for _, f := range zr.File {
		names = append(names, f.Name)
		rc, _ := f.Open()
		members[f.Name], _ = io.ReadAll(rc)
		rc.Close()
	}
	for _, want := range []string{"report.md", "report_content_list.json", "report_middle.json", "report_model.pdf", "report_layout.pdf", "report_spans.pdf"} {
		if !slices.Contains(names, want) {
			t.Errorf("ZIP lacks %s: %v", want, names)
		}
	}
	if !slices.ContainsFunc(names, regexp.MustCompile(`^images/[0-9a-f]{64}\.jpg$`).MatchString) {
		t.Errorf("ZIP has no images/<sha256>.jpg: %v", names)
	}
	var middle struct {
		PdfInfo []struct {
			PageIdx    int              `json:"page_idx"`
			PageSize   []float64        `json:"page_size"`
			ParaBlocks []map[string]any `json:"para_blocks"`
			Preproc    []any            `json:"preproc_blocks"`
			Discarded  []map[string]any `json:"discarded_blocks"`
		} `json:"pdf_info"`
	}
	if err := json.Unmarshal(members["report_middle.json"], &middle); err != nil {
		t.Fatal(err)
	}
	p := middle.PdfInfo[0]
	if len(middle.PdfInfo) != 1 || p.PageIdx != 0 || p.PageSize[0] != 612 || len(p.ParaBlocks) != 3 || len(p.Preproc) != 3 ||
		len(p.Discarded) != 1 || p.Discarded[0]["type"] != "discarded" {
		t.Errorf("middle.json = %s", members["report_middle.json"])
	}
	if !strings.Contains(string(members["report_middle.json"]), `"bbox":[72,60,540,90]`) {
		t.Errorf("boxes are not written as integers: %s", members["report_middle.json"])
	}
	if table := p.ParaBlocks[2]; table["type"] != "table" || table["blocks"] == nil || table["lines"] != nil {
		t.Errorf("table block = %v, want child blocks and no lines", table)
	}
	if bytes.Contains(members["report_content_list.json"], []byte("bbox")) {
		t.Errorf("content_list.json carries boxes: %s", members["report_content_list.json"])
	}

	s.ForgetArchives()
	if status, body := get(t, c, s.URL+dl); status != 404 || string(body) != `{"detail":"Not Found"}` {
		t.Errorf("download after ForgetArchives = %d %s", status, body)
	}
	if s.Count(ocrfake.EndpointParse) != 1 || s.Count(ocrfake.EndpointDownload) != 2 {
		t.Errorf("counts parse %d download %d", s.Count(ocrfake.EndpointParse), s.Count(ocrfake.EndpointDownload))
	}
}

func TestParseFailures(t *testing.T) {
	t.Parallel()
	s := ocrfake.New()
	defer s.Close()
	c := client(t)
	status, v := upload(t, c, s.URL+"/parse", "file", "x.tiff", []byte("x"))
	if status != 500 || v["detail"] != "Parsing failed: 400: Unsupported file type: .tiff. Allowed: .pdf, .jpg, .jpeg, .png" {
		t.Errorf("/parse .tiff = %d %v", status, v)
	}
	s.SetFaults(ocrfake.Faults{ParseFailure: "oom"})
	status, v = upload(t, c, s.URL+"/parse", "file", "x.png", []byte("x"))
	if status != 500 || v["detail"] != "Parsing failed: oom" {
		t.Errorf("ParseFailure = %d %v", status, v)
	}
	s.SetFaults(ocrfake.Faults{ZipNotFound: true})
	_, v = upload(t, c, s.URL+"/parse", "file", "x.png", []byte("x"))
	if status, _ := get(t, c, s.URL+v["download_url"].(string)); status != 404 {
		t.Errorf("ZipNotFound download = %d", status)
	}
}

func TestRequestsAreServedOneAtATime(t *testing.T) {
	t.Parallel()
	s := ocrfake.New()
	defer s.Close()
	s.SetFaults(ocrfake.Faults{Delay: 150 * time.Millisecond})
	c := client(t)
	start := time.Now()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			var buf bytes.Buffer
			w := multipart.NewWriter(&buf)
			p, _ := w.CreateFormFile("file", "a.png")
			_, _ = p.Write([]byte("x"))
			_ = w.Close()
			resp, err := c.Post(s.URL+"/ocr/text", w.FormDataContentType(), &buf)
			if err != nil {
				t.Error(err) // not Fatal: this is not the test's goroutine
				return
			}
			_ = resp.Body.Close()
		})
	}
	wg.Wait()
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("two requests took %v, want them queued (>= 300 ms)", d)
	}
}

func TestClosedServerRefuses(t *testing.T) {
	t.Parallel()
	s := ocrfake.New()
	s.Close()
	s.Close()
	resp, err := client(t).Get(s.URL + "/health")
	if err == nil {
		resp.Body.Close()
		t.Fatal("a closed server answered")
	}
}
