package ocr_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/ocr"
	"github.com/polygateway/polygateway/ocr/ocrfake"
	"github.com/polygateway/polygateway/telemetry"
)

func TestRecognizeText(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.SetText("第一行\n\nsecond page")
	c := newClient(t, ocr.Config{}, nil, urls(fake))

	res, err := c.RecognizeText(t.Context(), pngBytes)
	if err != nil {
		t.Fatalf("RecognizeText: %v", err)
	}
	if res.Text != "第一行\n\nsecond page" {
		t.Errorf("Text = %q", res.Text)
	}
	if res.SourceName != "monkey_1" || res.Provider != "monkey" || res.Model != "monkey-ocr" {
		t.Errorf("provenance = %q %q %q", res.SourceName, res.Provider, res.Model)
	}
	if len(res.CallID) != 32 || res.Latency <= 0 || len(res.Attempts) != 1 {
		t.Errorf("CallID %q, Latency %v, Attempts %v", res.CallID, res.Latency, res.Attempts)
	}
	if !strings.Contains(string(res.Raw), `"task_type":"text"`) || res.Message == "" {
		t.Errorf("Raw = %s, Message = %q", res.Raw, res.Message)
	}
	up := fake.Uploads()
	if len(up) != 1 || up[0].Endpoint != ocrfake.EndpointText || up[0].Filename != "image.png" ||
		up[0].ContentType != "image/png" || up[0].Size != len(pngBytes) {
		t.Errorf("uploads = %+v", up)
	}
}

func TestRecognizeTextNamesTheUploadByItsFormat(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	c := newClient(t, ocr.Config{}, nil, urls(fake))
	for _, doc := range [][]byte{jpegBytes, pdfBytes} {
		if _, err := c.RecognizeText(t.Context(), doc); err != nil {
			t.Fatalf("RecognizeText: %v", err)
		}
	}
	up := fake.Uploads()
	if len(up) != 2 || up[0].Filename != "image.jpg" || up[0].ContentType != "image/jpeg" ||
		up[1].Filename != "document.pdf" || up[1].ContentType != "application/pdf" {
		t.Errorf("uploads = %+v", up)
	}
}

func TestRecognizeTextEmptyTextIsAResult(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.SetText("")
	c := newClient(t, ocr.Config{}, nil, urls(fake))
	res, err := c.RecognizeText(t.Context(), pngBytes)
	if err != nil || res.Text != "" {
		t.Fatalf("RecognizeText = %+v, %v; want an empty text and no error", res, err)
	}
}

func TestUnsupportedBytesAreRejectedLocally(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	c := newClient(t, ocr.Config{}, nil, urls(fake))
	for _, tc := range []struct {
		doc  []byte
		code string
	}{{gifBytes, ocr.CodeUnsupportedFileType}, {nil, ocr.CodeEmptyImage}} {
		_, err := c.RecognizeText(t.Context(), tc.doc)
		var re *polygateway.RequestRejectedError
		if !errors.As(err, &re) || re.Code != tc.code {
			t.Errorf("RecognizeText(%q) = %v, want RequestRejectedError %s", tc.doc, err, tc.code)
		}
		_, err = c.ParseLayout(t.Context(), tc.doc)
		if !errors.As(err, &re) || re.Code != tc.code {
			t.Errorf("ParseLayout(%q) = %v, want RequestRejectedError %s", tc.doc, err, tc.code)
		}
	}
	if n := fake.Count(ocrfake.EndpointText) + fake.Count(ocrfake.EndpointParse); n != 0 {
		t.Errorf("%d requests reached the server, want 0", n)
	}
}

// twoPages is a two-page layout with a discarded footer.
func twoPages() []ocrfake.Page {
	return []ocrfake.Page{
		{
			Size: [2]float64{612, 792},
			Blocks: []ocrfake.Block{
				{Type: "title", BBox: []float64{72, 60, 540, 90}, Text: "Report"},
				{Type: "text", BBox: []float64{72, 110, 540, 300}, Text: "Body"},
				{Type: "image", BBox: []float64{100, 320, 500, 560}, Text: "Figure 1"},
			},
			Discarded: []ocrfake.Block{{Type: "discarded", BBox: []float64{72, 750, 540, 770}, Text: "1"}},
		},
		{
			Size: [2]float64{595.5, 842.25},
			Blocks: []ocrfake.Block{
				{Type: "table", BBox: []float64{50.5, 80, 545, 400.75}, Text: "Table 1"},
				{Type: "interline_equation", BBox: []float64{200, 420, 400, 460}, Text: "E=mc^2"},
			},
		},
	}
}

func TestParseLayoutTwoPages(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.SetPages(twoPages()...)
	c := newClient(t, ocr.Config{}, nil, urls(fake))

	res, err := c.ParseLayout(t.Context(), pdfBytes)
	if err != nil {
		t.Fatalf("ParseLayout: %v", err)
	}
	want := []ocr.LayoutElement{
		{Type: "title", BBox: [4]float64{72, 60, 540, 90}, PageIndex: 0},
		{Type: "text", BBox: [4]float64{72, 110, 540, 300}, PageIndex: 0},
		{Type: "image", BBox: [4]float64{100, 320, 500, 560}, PageIndex: 0},
		{Type: "table", BBox: [4]float64{50.5, 80, 545, 400.75}, PageIndex: 1},
		{Type: "interline_equation", BBox: [4]float64{200, 420, 400, 460}, PageIndex: 1},
	}
	if len(res.Elements) != len(want) {
		t.Fatalf("Elements = %+v, want %+v", res.Elements, want)
	}
	for i := range want {
		if res.Elements[i] != want[i] {
			t.Errorf("Elements[%d] = %+v, want %+v", i, res.Elements[i], want[i])
		}
	}
	if len(res.PageSizes) != 2 || res.PageSizes[0] != [2]float64{612, 792} || res.PageSizes[1] != [2]float64{595.5, 842.25} {
		t.Errorf("PageSizes = %v", res.PageSizes)
	}
	if res.SourceName != "monkey_1" || len(res.CallID) != 32 || res.Latency <= 0 {
		t.Errorf("provenance = %q %q %v", res.SourceName, res.CallID, res.Latency)
	}
	if !strings.Contains(string(res.Raw), `"pdf_info"`) {
		t.Errorf("Raw is not the middle.json: %.80s", res.Raw)
	}
	if p, d := fake.Count(ocrfake.EndpointParse), fake.Count(ocrfake.EndpointDownload); p != 1 || d != 1 {
		t.Errorf("parse/download requests = %d/%d, want 1/1", p, d)
	}
	if up := fake.Uploads(); len(up) != 1 || up[0].Filename != "document.pdf" {
		t.Errorf("uploads = %+v", up)
	}
}

func TestParseLayoutBlankPageHasNoElements(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.SetPages(ocrfake.Page{Size: [2]float64{480, 640}})
	c := newClient(t, ocr.Config{}, nil, urls(fake))
	res, err := c.ParseLayout(t.Context(), pngBytes)
	if err != nil {
		t.Fatalf("ParseLayout: %v", err)
	}
	if res.Elements == nil || len(res.Elements) != 0 || len(res.PageSizes) != 1 || res.PageSizes[0] != [2]float64{480, 640} {
		t.Errorf("result = %+v", res)
	}
}

func TestParseLayoutKeepsBoxesBeyondThePage(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.SetPages(ocrfake.Page{Size: [2]float64{100, 200}, Blocks: []ocrfake.Block{
		{Type: "image", BBox: []float64{-20, -10, 130, 250}},
		{Type: "text", BBox: []float64{150, 10, 180, 40}}, // right of the page, within a page width
	}})
	c := newClient(t, ocr.Config{}, nil, urls(fake))
	res, err := c.ParseLayout(t.Context(), pngBytes)
	if err != nil {
		t.Fatalf("ParseLayout: %v", err)
	}
	if len(res.Elements) != 2 || res.Elements[0].BBox != [4]float64{-20, -10, 130, 250} {
		t.Errorf("Elements = %+v", res.Elements)
	}
}

func TestFailover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		first func(t *testing.T) string
		op    string
	}{
		{"refused/text", refusedURL, "text"},
		{"refused/layout", refusedURL, "layout"},
		{"500/text", func(t *testing.T) string {
			f := newFake(t)
			f.SetFaults(ocrfake.Faults{TextStatus: 503})
			return f.URL
		}, "text"},
		{"500/layout", func(t *testing.T) string {
			f := newFake(t)
			f.SetFaults(ocrfake.Faults{ParseFailure: "CUDA out of memory"})
			return f.URL
		}, "layout"},
		{"zip404/layout", func(t *testing.T) string {
			f := newFake(t)
			f.SetFaults(ocrfake.Faults{ZipNotFound: true})
			return f.URL
		}, "layout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			healthy := newFake(t)
			c := newClient(t, ocr.Config{}, nil, []string{tc.first(t), healthy.URL})
			var source string
			var attempts []string
			if tc.op == "text" {
				res, err := c.RecognizeText(t.Context(), pngBytes)
				if err != nil {
					t.Fatalf("RecognizeText: %v", err)
				}
				source, attempts = res.SourceName, res.Attempts
			} else {
				res, err := c.ParseLayout(t.Context(), pngBytes)
				if err != nil {
					t.Fatalf("ParseLayout: %v", err)
				}
				source, attempts = res.SourceName, res.Attempts
			}
			// A refused connection fails over at once; a 5xx or a missing
			// result of a healthy preferred server is a blip, retried once
			// in its tier first.
			want := "monkey_1,monkey_1,monkey_2"
			if strings.HasPrefix(tc.name, "refused") {
				want = "monkey_1,monkey_2"
			}
			if source != "monkey_2" || strings.Join(attempts, ",") != want {
				t.Errorf("answered by %s after %v, want monkey_2 after [%s]", source, attempts, want)
			}
		})
	}
}

// TestTaskFailureIsAliveForTheBreaker: an HTTP 200 with "success": false
// and a message other than an unsupported file type is transient, as the
// protocol page MONKEYOCR.md says ("other messages: transient, but the HTTP
// exchange proves the server alive for the breaker"): the call fails over
// from monkey_1 to monkey_2, which answers, and monkey_1's circuit records
// the answer as alive — closed, no failure counted.
func TestTaskFailureIsAliveForTheBreaker(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	other := newFake(t)
	fake.SetFaults(ocrfake.Faults{TextFailure: "CUDA out of memory"})
	c := newClient(t, ocr.Config{}, map[string]string{"OCR__BREAKER__FAIL_THRESHOLD": "2"}, urls(fake, other))

	const calls = 6
	for i := range calls {
		res, err := c.RecognizeText(t.Context(), pngBytes)
		if err != nil || res.SourceName != "monkey_2" || res.Text != ocrfake.DefaultText {
			t.Fatalf("call %d: RecognizeText = %+v, %v; want monkey_2's answer", i, res, err)
		}
		if i == 0 && !slices.Equal(res.Attempts, []string{"monkey_1", "monkey_2"}) {
			t.Errorf("Attempts = %v, want monkey_1's task failure, then monkey_2", res.Attempts)
		}
		if b := breakerOf(t, c, "monkey_1"); b.State != core.StateClosed || b.Opens != 0 || b.ConsecutiveFailures != 0 {
			t.Fatalf("call %d: breaker of monkey_1 = %+v, want closed with no failure counted", i, b)
		}
	}
	if n := fake.Count(ocrfake.EndpointText); n < 1 {
		t.Errorf("monkey_1 got %d requests, want at least the first call's", n)
	}
	if n := other.Count(ocrfake.EndpointText); n != calls {
		t.Errorf("monkey_2 got %d requests for %d calls, want every call", n, calls)
	}
}

// TestTaskFailuresOnEverySourceEndUnavailable: when every attempt is a task
// failure the call ends as GatewayUnavailableError wrapping the last one
// (errors.Is ErrTaskFailed, PerSource task_failed), after the whole retry
// budget, and no circuit opens although each source failed more often than
// its threshold.
func TestTaskFailuresOnEverySourceEndUnavailable(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	other := newFake(t)
	fake.SetFaults(ocrfake.Faults{TextFailure: "CUDA out of memory"})
	other.SetFaults(ocrfake.Faults{TextFailure: "worker crashed"})
	c := newClient(t, ocr.Config{}, map[string]string{"OCR__BREAKER__FAIL_THRESHOLD": "1", "OCR__RETRY__MAX_ATTEMPTS": "4"}, urls(fake, other))

	_, err := c.RecognizeText(t.Context(), pngBytes)
	var ue *polygateway.GatewayUnavailableError
	var te *polygateway.TransientError
	if !errors.As(err, &ue) || !errors.As(err, &te) || !errors.Is(err, ocr.ErrTaskFailed) {
		t.Fatalf("RecognizeText = %v, want GatewayUnavailableError wrapping a TransientError of ErrTaskFailed", err)
	}
	if te.Reason != core.ReasonTaskFailed || te.StatusCode != 200 || !strings.Contains(te.Message, "OCR task failed: ") {
		t.Errorf("last attempt = %+v, want Reason task_failed, status 200 and the server's message", te)
	}
	if ue.PerSource["monkey_1"] != core.ReasonTaskFailed || ue.PerSource["monkey_2"] != core.ReasonTaskFailed {
		t.Errorf("PerSource = %v, want task_failed for both", ue.PerSource)
	}
	if n := fake.Count(ocrfake.EndpointText) + other.Count(ocrfake.EndpointText); n != 4 {
		t.Errorf("%d attempts, want the budget of 4", n)
	}
	for _, name := range []string{"monkey_1", "monkey_2"} {
		if b := breakerOf(t, c, name); b.State != core.StateClosed || b.Opens != 0 || b.ConsecutiveFailures != 0 {
			t.Errorf("breaker of %s = %+v, want closed with no failure counted", name, b)
		}
	}
}

func TestUnsupportedTypeFromTheServerIsRejected(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	// What the server says for a bad extension, inside HTTP 200 (/ocr/*)
	// and as a 500 (/parse).
	fake.SetFaults(ocrfake.Faults{
		TextFailure:  "400: Unsupported file type: .png. Allowed: .pdf",
		ParseFailure: "400: Unsupported file type: .png. Allowed: .pdf",
	})
	c := newClient(t, ocr.Config{}, nil, urls(fake))
	_, err := c.RecognizeText(t.Context(), pngBytes)
	var re *polygateway.RequestRejectedError
	if !errors.As(err, &re) || re.Code != ocr.CodeUnsupportedFileType || re.StatusCode != 200 {
		t.Errorf("RecognizeText = %v, want RequestRejectedError %s with status 200", err, ocr.CodeUnsupportedFileType)
	}
	_, err = c.ParseLayout(t.Context(), pngBytes)
	if !errors.As(err, &re) || re.Code != ocr.CodeUnsupportedFileType || re.StatusCode != 500 {
		t.Errorf("ParseLayout = %v, want RequestRejectedError %s with status 500", err, ocr.CodeUnsupportedFileType)
	}
	if n := fake.Count(ocrfake.EndpointParse); n != 1 {
		t.Errorf("/parse got %d requests, want 1 (no retry)", n)
	}
	if b := breakerOf(t, c, "monkey_1"); b.State != core.StateClosed || b.ConsecutiveFailures != 0 {
		t.Errorf("breaker = %+v, want closed and clean", b)
	}
}

func TestParseFailureIsTransientAndChargesTheBreaker(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.SetFaults(ocrfake.Faults{ParseFailure: "model crashed"})
	c := newClient(t, ocr.Config{}, map[string]string{
		"OCR__RETRY__MAX_ATTEMPTS":     "1",
		"OCR__BREAKER__FAIL_THRESHOLD": "2",
	}, urls(fake))
	for range 2 {
		_, err := c.ParseLayout(t.Context(), pngBytes)
		var te *polygateway.TransientError
		if !errors.As(err, &te) || te.StatusCode != 500 || !strings.Contains(te.Message, "Parsing failed: model crashed") {
			t.Fatalf("ParseLayout = %v, want TransientError 500", err)
		}
	}
	if b := breakerOf(t, c, "monkey_1"); b.State != core.StateOpen {
		t.Errorf("breaker = %+v, want open after two 500s", b)
	}
}

func TestDegenerateBBoxIsResultInvalid(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	other := newFake(t)
	fake.SetFaults(ocrfake.Faults{DegenerateBBox: true})
	c := newClient(t, ocr.Config{}, map[string]string{"OCR__BREAKER__FAIL_THRESHOLD": "1"}, urls(fake, other))
	for range 3 {
		_, err := c.ParseLayout(t.Context(), pngBytes)
		var ie *polygateway.ResultInvalidError
		if !errors.As(err, &ie) || !errors.Is(err, ocr.ErrBadGeometry) || ie.Source != "monkey_1" {
			t.Fatalf("ParseLayout = %v, want ResultInvalidError(ErrBadGeometry)", err)
		}
		if !strings.Contains(ie.Raw, "pdf_info") {
			t.Errorf("Raw = %.60q, want the middle.json", ie.Raw)
		}
	}
	if n := fake.Count(ocrfake.EndpointParse); n != 3 {
		t.Errorf("/parse got %d requests for 3 calls, want 3 (no retry)", n)
	}
	if n := other.Count(ocrfake.EndpointParse); n != 0 {
		t.Errorf("monkey_2 got %d requests, want 0 (no switch)", n)
	}
	if b := breakerOf(t, c, "monkey_1"); b.State != core.StateClosed || b.Opens != 0 {
		t.Errorf("breaker = %+v, want closed", b)
	}
}

func TestBrokenMiddleJSON(t *testing.T) {
	t.Parallel()
	page := func(body string) []byte { return []byte(`{"pdf_info":[` + body + `]}`) }
	block := func(bbox string) []byte {
		return page(`{"page_idx":0,"page_size":[612,792],"para_blocks":[{"type":"text","bbox":` + bbox + `}]}`)
	}
	for _, tc := range []struct {
		name   string
		middle []byte
		kind   error
	}{
		{"not json", []byte("{not json"), ocr.ErrBadLayout},
		{"NaN literal", block("[NaN, 1, 2, 3]"), ocr.ErrBadLayout},
		{"no pdf_info", []byte(`{"pages":[]}`), ocr.ErrBadLayout},
		{"no pages", page(""), ocr.ErrBadLayout},
		{"page_idx out of sequence", page(`{"page_idx":1,"page_size":[612,792],"para_blocks":[]}`), ocr.ErrBadLayout},
		{"page_size zero", page(`{"page_idx":0,"page_size":[0,792],"para_blocks":[]}`), ocr.ErrBadGeometry},
		{"page_size arity", page(`{"page_idx":0,"page_size":[612],"para_blocks":[]}`), ocr.ErrBadGeometry},
		{"page_size missing", page(`{"page_idx":0,"para_blocks":[]}`), ocr.ErrBadGeometry},
		{"bbox arity 3", block("[1,2,3]"), ocr.ErrBadGeometry},
		{"bbox arity 5", block("[1,2,3,4,5]"), ocr.ErrBadGeometry},
		{"bbox null element", block("[1,null,30,40]"), ocr.ErrBadGeometry},
		{"bbox strings", block(`["1","2","30","40"]`), ocr.ErrBadGeometry},
		{"bbox missing", page(`{"page_idx":0,"page_size":[612,792],"para_blocks":[{"type":"text"}]}`), ocr.ErrBadGeometry},
		{"bbox overflow", block("[1,2,1e400,40]"), ocr.ErrBadGeometry},
		{"zero width", block("[10,10,10,40]"), ocr.ErrBadGeometry},
		{"zero height", block("[10,40,30,40]"), ocr.ErrBadGeometry},
		{"inverted", block("[30,10,10,40]"), ocr.ErrBadGeometry},
		{"far outside", block("[5000,5000,5100,5100]"), ocr.ErrBadGeometry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := newFake(t)
			fake.SetFaults(ocrfake.Faults{MiddleJSON: tc.middle})
			c := newClient(t, ocr.Config{}, nil, urls(fake))
			_, err := c.ParseLayout(t.Context(), pngBytes)
			var ie *polygateway.ResultInvalidError
			if !errors.As(err, &ie) || !errors.Is(err, tc.kind) {
				t.Fatalf("ParseLayout = %v, want ResultInvalidError wrapping %v", err, tc.kind)
			}
			if n := fake.Count(ocrfake.EndpointParse); n != 1 {
				t.Errorf("/parse got %d requests, want 1", n)
			}
		})
	}
}

func TestFarOutsideCheckCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.SetPages(ocrfake.Page{Size: [2]float64{100, 100}, Blocks: []ocrfake.Block{{Type: "text", BBox: []float64{5000, 5000, 5100, 5100}}}})
	c := newClient(t, ocr.Config{MaxOutsidePages: -1}, nil, urls(fake))
	res, err := c.ParseLayout(t.Context(), pngBytes)
	if err != nil || len(res.Elements) != 1 {
		t.Fatalf("ParseLayout = %+v, %v", res, err)
	}
}

func TestArchiveFaults(t *testing.T) {
	t.Parallel()
	genuine := ocrfake.MiddleJSON(ocrfake.DefaultPages())
	decoy := ocrfake.MiddleJSON([]ocrfake.Page{{Size: [2]float64{1, 1}}})
	padded := append(append([]byte(nil), genuine[:len(genuine)-1]...), []byte(`,"pad":"`+strings.Repeat(" ", 1<<20)+`"}`)...)
	small := ocr.Config{MaxMemberBytes: 256 << 10}
	for _, tc := range []struct {
		name   string
		cfg    ocr.Config
		faults ocrfake.Faults
		// want is nil for success (then the page width is checked).
		want     error
		tooLarge bool
		width    float64
	}{
		{"missing middle.json", ocr.Config{}, ocrfake.Faults{NoMiddleJSON: true}, ocr.ErrBadArchive, false, 0},
		{"not a zip", ocr.Config{}, ocrfake.Faults{NotAZip: true}, ocr.ErrBadArchive, false, 0},
		{"no download_url", ocr.Config{}, ocrfake.Faults{NoDownloadURL: true}, ocr.ErrBadArchive, false, 0},
		{"middle.json bomb", small, ocrfake.Faults{MiddleJSON: padded}, ocr.ErrBadArchive, true, 0},
		{"huge other member is never inflated", small, ocrfake.Faults{ExtraMembers: []ocrfake.Member{{Name: "images/huge.jpg", Zeros: 8 << 20}}}, nil, false, 612},
		{"archive too big", ocr.Config{MaxArchiveBytes: 1024}, ocrfake.Faults{ExtraMembers: []ocrfake.Member{{Name: "images/noise.jpg", Data: []byte(strings.Repeat("xyz", 4096))}}}, ocr.ErrBadArchive, true, 0},
		{"too many members", ocr.Config{MaxMembers: 20}, ocrfake.Faults{ExtraMembers: manyMembers(30)}, ocr.ErrBadArchive, true, 0},
		{"traversal names only", ocr.Config{}, ocrfake.Faults{NoMiddleJSON: true, ExtraMembers: []ocrfake.Member{
			{Name: "../evil_middle.json", Data: decoy}, {Name: "/abs_middle.json", Data: decoy},
			{Name: "C:/win_middle.json", Data: decoy}, {Name: `sub\back_middle.json`, Data: decoy},
			{Name: "a/../../up_middle.json", Data: decoy},
		}}, ocr.ErrBadArchive, false, 0},
		{"traversal names ignored", ocr.Config{}, ocrfake.Faults{ExtraMembers: []ocrfake.Member{
			{Name: "../evil_middle.json", Data: decoy}, {Name: "/abs_middle.json", Data: decoy},
		}}, nil, false, 612},
		{"middle.json in a subdirectory", ocr.Config{}, ocrfake.Faults{NoMiddleJSON: true, ExtraMembers: []ocrfake.Member{
			{Name: "out/doc/", Data: []byte{}}, {Name: "out/doc/doc_middle.json", Data: genuine},
		}}, nil, false, 612},
		{"shallowest middle.json wins", ocr.Config{}, ocrfake.Faults{ExtraMembers: []ocrfake.Member{
			{Name: "page_0/x_middle.json", Data: decoy},
		}}, nil, false, 612},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := newFake(t)
			fake.SetFaults(tc.faults)
			c := newClient(t, tc.cfg, nil, urls(fake))
			res, err := c.ParseLayout(t.Context(), pngBytes)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("ParseLayout: %v", err)
				}
				if res.PageSizes[0][0] != tc.width {
					t.Errorf("page width = %v, want %v (the genuine middle.json)", res.PageSizes[0][0], tc.width)
				}
				return
			}
			var ie *polygateway.ResultInvalidError
			if !errors.As(err, &ie) || !errors.Is(err, tc.want) {
				t.Fatalf("ParseLayout = %v, want ResultInvalidError wrapping %v", err, tc.want)
			}
			if errors.Is(err, ocr.ErrTooLarge) != tc.tooLarge {
				t.Errorf("errors.Is(%v, ErrTooLarge) = %v, want %v", err, !tc.tooLarge, tc.tooLarge)
			}
			if n := fake.Count(ocrfake.EndpointParse); n != 1 {
				t.Errorf("/parse got %d requests, want 1 (no retry)", n)
			}
			if b := breakerOf(t, c, "monkey_1"); b.State != core.StateClosed || b.ConsecutiveFailures != 0 {
				t.Errorf("breaker = %+v, want closed and clean", b)
			}
		})
	}
}

func TestAnswerBeyondTheLimitIsResultInvalid(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.SetText(strings.Repeat("long text ", 100))
	c := newClient(t, ocr.Config{MaxResponseBytes: 512}, nil, urls(fake))
	_, err := c.RecognizeText(t.Context(), pngBytes)
	var ie *polygateway.ResultInvalidError
	if !errors.As(err, &ie) || !errors.Is(err, ocr.ErrTooLarge) {
		t.Fatalf("RecognizeText = %v, want ResultInvalidError(ErrTooLarge)", err)
	}
	if n := fake.Count(ocrfake.EndpointText); n != 1 {
		t.Errorf("%d requests, want 1 (no retry)", n)
	}
}

func manyMembers(n int) []ocrfake.Member {
	out := make([]ocrfake.Member, n)
	for i := range out {
		out[i] = ocrfake.Member{Name: "images/" + strings.Repeat("a", i+1) + ".jpg", Data: []byte("x")}
	}
	return out
}

func TestArchiveNotFoundIsTransient(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.SetFaults(ocrfake.Faults{ZipNotFound: true})
	c := newClient(t, ocr.Config{}, map[string]string{"OCR__RETRY__MAX_ATTEMPTS": "3"}, urls(fake))
	_, err := c.ParseLayout(t.Context(), pngBytes)
	var ue *polygateway.GatewayUnavailableError
	var te *polygateway.TransientError
	if !errors.As(err, &ue) || ue.Reason != core.ReasonRetryExhausted || !errors.As(err, &te) ||
		te.Code != ocr.CodeArchiveNotFound || te.StatusCode != 404 {
		t.Fatalf("ParseLayout = %v, want retries exhausted after archive_not_found", err)
	}
	// Every attempt posts again and downloads again.
	if p, d := fake.Count(ocrfake.EndpointParse), fake.Count(ocrfake.EndpointDownload); p != 3 || d != 3 {
		t.Errorf("parse/download requests = %d/%d, want 3/3", p, d)
	}
}

func TestAttemptTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.SetFaults(ocrfake.Faults{Delay: 10 * time.Second})
	c := newClient(t, ocr.Config{}, map[string]string{
		"OCR__MONKEY__1__TIMEOUT_S": "0.2",
		"OCR__RETRY__MAX_ATTEMPTS":  "1",
	}, urls(fake))
	start := time.Now()
	_, err := c.RecognizeText(t.Context(), pngBytes)
	var te *polygateway.TransientError
	if !errors.As(err, &te) || te.Reason != core.ReasonTimeout {
		t.Fatalf("RecognizeText = %v, want a timeout TransientError", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v, want about the 0.2 s source timeout", d)
	}
}

func TestCancellation(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.SetFaults(ocrfake.Faults{Delay: 10 * time.Second})
	mem := telemetry.NewMemory()
	c := newClient(t, ocr.Config{}, nil, urls(fake), polygateway.WithTelemetry(mem))

	for _, op := range []string{"text", "layout"} {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		var err error
		if op == "text" {
			_, err = c.RecognizeText(ctx, pngBytes)
		} else {
			_, err = c.ParseLayout(ctx, pngBytes)
		}
		if !errors.Is(err, context.Canceled) || !errors.Is(err, polygateway.ErrGateway) {
			t.Errorf("%s: err = %v, want context.Canceled", op, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: took %v after cancellation", op, d)
		}
		cancel()
	}

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.RecognizeText(ctx, pngBytes); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("expired deadline: err = %v, want context.DeadlineExceeded", err)
	}
	if n := mem.Len(); n != 0 {
		t.Errorf("%d telemetry rows for cancelled calls, want 0", n)
	}
	if b := breakerOf(t, c, "monkey_1"); b.State != core.StateClosed || b.ConsecutiveFailures != 0 {
		t.Errorf("breaker = %+v, want untouched by cancellations", b)
	}
	for _, s := range c.Sources(t.Context()) {
		if s.InFlight != 0 {
			t.Errorf("%s in flight = %d after the calls", s.Name, s.InFlight)
		}
	}
}

func TestTelemetryRowsHaveZeroUsage(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	mem := telemetry.NewMemory()
	c := newClient(t, ocr.Config{}, nil, urls(fake), polygateway.WithTelemetry(mem))

	text, err := c.RecognizeText(t.Context(), pngBytes)
	if err != nil {
		t.Fatal(err)
	}
	layout, err := c.ParseLayout(t.Context(), pdfBytes)
	if err != nil {
		t.Fatal(err)
	}
	fake.SetFaults(ocrfake.Faults{TextFailure: "boom"})
	_, failErr := c.RecognizeText(t.Context(), pngBytes)
	if failErr == nil {
		t.Fatal("the failing call succeeded")
	}

	rows := mem.Records()
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	for i, r := range rows {
		if r.PromptTokens != 0 || r.CompletionTokens != 0 || r.Cost != nil || r.CacheHit {
			t.Errorf("row %d: tokens %d/%d cost %v cache %v, want zero usage", i, r.PromptTokens, r.CompletionTokens, r.Cost, r.CacheHit)
		}
		if r.SourceName != "monkey_1" || r.LatencyMS <= 0 {
			t.Errorf("row %d: source %q latency %v", i, r.SourceName, r.LatencyMS)
		}
		r.Render()
		if !strings.Contains(r.Messages, "sha256:") || strings.Contains(r.Messages, "fake png pixels") {
			t.Errorf("row %d messages = %s, want a digest and never the bytes", i, r.Messages)
		}
	}
	if rows[0].CallID != text.CallID || rows[0].UsageSource != "measured" || rows[0].Response != text.Text || rows[0].Model != "monkey-ocr" {
		t.Errorf("text row = %+v", rows[0])
	}
	if rows[1].CallID != layout.CallID || rows[1].UsageSource != "measured" || !strings.Contains(rows[1].Response, `"pages":1`) ||
		!strings.Contains(rows[1].Messages, "ocr_layout application/pdf") {
		t.Errorf("layout row = %+v", rows[1])
	}
	// A task failure is transient: with one source, the retry budget is
	// spent on it and the call ends unavailable.
	if !strings.HasPrefix(rows[2].Error, "GatewayUnavailableError: ") || !strings.Contains(rows[2].Error, "monkey_1=task_failed") {
		t.Errorf("failure row error = %q", rows[2].Error)
	}
}

func TestResponsesAreNeverCached(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	c := newClient(t, ocr.Config{}, map[string]string{
		"PGW_CACHE_BACKEND": "memory", "PGW_CACHE_NAMESPACE": "ocr-test", "PGW_CACHE_TTL_S": "60",
	}, urls(fake))
	for range 2 {
		if _, err := c.RecognizeText(t.Context(), pngBytes); err != nil {
			t.Fatal(err)
		}
	}
	if n := fake.Count(ocrfake.EndpointText); n != 2 {
		t.Errorf("%d requests for two identical calls, want 2 (no cache)", n)
	}
}

func TestLimiterGovernsOCRCalls(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.SetFaults(ocrfake.Faults{Delay: 300 * time.Millisecond})
	c := newClient(t, ocr.Config{}, map[string]string{
		"OCR__MONKEY__1__MAX_CONCURRENCY": "1",
		"OCR__QUOTA_FULL":                 "fail_fast",
	}, urls(fake))
	first := make(chan error, 1)
	go func() {
		_, err := c.RecognizeText(context.Background(), pngBytes)
		first <- err
	}()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && fake.Count(ocrfake.EndpointText) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	_, err := c.RecognizeText(t.Context(), pngBytes)
	var ue *polygateway.GatewayUnavailableError
	if !errors.As(err, &ue) || ue.Reason != core.ReasonRateLimited {
		t.Errorf("second call = %v, want rate limited by MAX_CONCURRENCY=1", err)
	}
	if err := <-first; err != nil {
		t.Errorf("first call: %v", err)
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	c := newClient(t, ocr.Config{}, nil, urls(fake))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RecognizeText(t.Context(), pngBytes); !errors.Is(err, polygateway.ErrClientClosed) {
		t.Errorf("after Close: %v, want ErrClientClosed", err)
	}
}

// TestANilContextIsRejected: a nil context is a RequestRejectedError (code
// nil_context), not a panic, and nothing is sent.
func TestANilContextIsRejected(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	c := newClient(t, ocr.Config{}, nil, urls(fake))
	var noCtx context.Context // nil
	var rej *polygateway.RequestRejectedError
	if _, err := c.RecognizeText(noCtx, pngBytes); !errors.As(err, &rej) || rej.Code != "nil_context" {
		t.Errorf("RecognizeText: err = %v, want a RequestRejectedError with code nil_context", err)
	}
	if _, err := c.ParseLayout(noCtx, pngBytes); !errors.As(err, &rej) || rej.Code != "nil_context" {
		t.Errorf("ParseLayout: err = %v, want a RequestRejectedError with code nil_context", err)
	}
	if n := fake.Count(ocrfake.EndpointText) + fake.Count(ocrfake.EndpointParse); n != 0 {
		t.Errorf("%d requests, want none", n)
	}
}

func TestFromSettings(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s, err := polygateway.LoadSettings("OCR", envFor(urls(fake), nil))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ocr.FromSettings(s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if res, err := c.RecognizeText(t.Context(), pngBytes); err != nil || res.Text != ocrfake.DefaultText {
		t.Errorf("RecognizeText = %+v, %v", res, err)
	}
	if c.Scope() != "OCR" {
		t.Errorf("Scope() = %q", c.Scope())
	}
}

func TestQualityGuardIsRefused(t *testing.T) {
	t.Parallel()
	c, err := ocr.FromEnv("OCR", polygateway.WithEnv(envFor([]string{"http://127.0.0.1:1"},
		map[string]string{"OCR__QUALITY__GUARD": "true"})))
	var ce *polygateway.ConfigError
	if !errors.As(err, &ce) || ce.Key != "OCR__QUALITY__GUARD" {
		if c != nil {
			c.Close()
		}
		t.Fatalf("FromEnv = %v, want a ConfigError naming OCR__QUALITY__GUARD", err)
	}
}

func TestEmbeddingKeyInAnOCRScopeIsRefused(t *testing.T) {
	t.Parallel()
	c, err := ocr.FromEnv("OCR", polygateway.WithEnv(envFor([]string{"http://127.0.0.1:1"},
		map[string]string{"OCR__BATCH_SIZE": "8", "OCR__X_MINE": "kept"})))
	var ce *polygateway.ConfigError
	if !errors.As(err, &ce) || ce.Key != "OCR__BATCH_SIZE" {
		if c != nil {
			c.Close()
		}
		t.Fatalf("FromEnv = %v, want a ConfigError naming OCR__BATCH_SIZE", err)
	}
	// A typo is caught by the settings parser, with the key meant.
	_, err = ocr.FromEnv("OCR", polygateway.WithEnv(envFor([]string{"http://127.0.0.1:1"},
		map[string]string{"OCR__SELECTR": "round_robin"})))
	if !errors.As(err, &ce) || ce.Key != "OCR__SELECTR" || !strings.Contains(ce.Problem, "did you mean OCR__SELECTOR?") {
		t.Fatalf("FromEnv = %v, want a ConfigError naming OCR__SELECTR with a suggestion", err)
	}
	// The user's own keys pass.
	c, err = ocr.FromEnv("OCR", polygateway.WithEnv(envFor([]string{"http://127.0.0.1:1"}, map[string]string{"OCR__X_MINE": "kept"})))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestFallbackCannotStandInForOCR(t *testing.T) {
	t.Parallel()
	called := make(chan struct{}, 4)
	c := newClient(t, ocr.Config{}, map[string]string{"OCR__RETRY__MAX_ATTEMPTS": "1"}, []string{refusedURL(t)},
		polygateway.WithFallback(func(context.Context, []polygateway.Message, error) (*polygateway.LLMResponse, error) {
			called <- struct{}{}
			return &polygateway.LLMResponse{Content: "made up"}, nil
		}))
	if _, err := c.RecognizeText(t.Context(), pngBytes); !errors.Is(err, ocr.ErrNoResult) {
		t.Errorf("RecognizeText = %v, want ErrNoResult", err)
	}
	if _, err := c.ParseLayout(t.Context(), pngBytes); !errors.Is(err, ocr.ErrNoResult) {
		t.Errorf("ParseLayout = %v, want ErrNoResult", err)
	}
	if n := len(called); n != 2 {
		t.Errorf("the fallback ran %d times, want 2", n)
	}
}
