package ocr

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"

	"github.com/polygateway/polygateway/internal/readerr"
)

// Reading a *_middle.json.
//
// The member is read by encoding/json as it is inflated: a json.Decoder
// walks the document with Token, the pages of pdf_info one at a time and
// the para_blocks of a page one block at a time (More, Decode), so that
// no more than Config.MaxLayoutPages pages and Config.MaxLayoutBlocks
// blocks are ever built: one past either limit ends the reading at once
// with a result that names the limit. The other members of a page are
// read and dropped; an array among them (preproc_blocks,
// discarded_blocks, …) is read element by element and bounded by
// MaxLayoutBlocks as well. What is read is what json.Unmarshal reads
// from the same bytes (keys matched as it matches struct fields, the last
// of repeated keys winning), and the checks come in the order a whole
// reading would give them: a body that is not JSON, or whose pdf_info is
// not an array, is ErrBadLayout whatever its pages say; then the pages in
// order, each wholly read before it is checked.

// middleLimits bound what a middle.json makes the client build.
type middleLimits struct {
	// maxOutside < 0 turns the far-outside check off (Config.MaxOutsidePages).
	maxOutside float64
	// maxPages and maxBlocks are Config.MaxLayoutPages and MaxLayoutBlocks.
	maxPages, maxBlocks int
}

// limitsOf returns the middle.json limits of cfg.
func limitsOf(cfg Config) middleLimits {
	return middleLimits{maxOutside: cfg.MaxOutsidePages, maxPages: cfg.MaxLayoutPages, maxBlocks: cfg.MaxLayoutBlocks}
}

// readFailure is a failure of the reader under the decoder (the member
// cannot be inflated, or is larger than allowed): not the document's.
type readFailure struct{ err error }

func (e *readFailure) Error() string { return e.err.Error() }
func (e *readFailure) Unwrap() error { return e.err }

// block is one element of para_blocks, as decoded.
type block struct {
	Type string          `json:"type"`
	BBox json.RawMessage `json:"bbox"`
}

// page is one element of pdf_info, as decoded: its members kept raw for
// the checks, which run when the page has been read.
type page struct {
	idx, size json.RawMessage
	blocks    []block
	// typeErr is the first value of a type encoding/json refuses in the
	// page (a whole reading fails on it).
	typeErr error
}

// middleReader is the state of one decodeMiddle.
type middleReader struct {
	dec *json.Decoder
	lim middleLimits

	// sawInfo: pdf_info was there and not null.
	sawInfo  bool
	pages    int
	sizes    [][2]float64
	elements []LayoutElement
	// docErr is a type error of the document (pdf_info not an array);
	// pageErr the first page that failed its checks.
	docErr, pageErr error
	pg              page
}

// decodeMiddle reads a middle.json from r: page sizes from page_size,
// elements from para_blocks (type, bbox, page index), and checks the
// geometry (see ErrBadGeometry). Errors: a *badResult (ErrBadLayout,
// ErrBadGeometry, or errLayoutTooLarge past a limit), or a *readFailure
// when r fails (the rest of r is read after a bad document, so that a
// failing or oversized member is reported as such, as a whole reading
// would).
func decodeMiddle(r io.Reader, lim middleLimits) ([]LayoutElement, [][2]float64, error) {
	rec := &readerr.Recorder{R: r}
	d := &middleReader{dec: json.NewDecoder(rec), lim: lim}
	err := d.read()
	var b *badResult
	if errors.As(err, &b) && errors.Is(b.kind, errLayoutTooLarge) {
		return nil, nil, err // fail fast: nothing more is read
	}
	if err != nil {
		_, _ = io.Copy(io.Discard, rec)
	}
	switch {
	case rec.Err != nil:
		return nil, nil, &readFailure{err: rec.Err}
	case err != nil:
		return nil, nil, bad(ErrBadLayout, "middle.json is not a JSON object with pdf_info: %v", err)
	case d.docErr != nil:
		return nil, nil, bad(ErrBadLayout, "middle.json is not a JSON object with pdf_info: %v", d.docErr)
	case !d.sawInfo:
		return nil, nil, bad(ErrBadLayout, "middle.json has no pdf_info")
	case d.pages == 0:
		return nil, nil, bad(ErrBadLayout, "middle.json has no pages")
	case d.pageErr != nil:
		return nil, nil, d.pageErr
	}
	if d.elements == nil {
		d.elements = []LayoutElement{}
	}
	return d.elements, d.sizes, nil
}

// read walks the document to its end.
func (d *middleReader) read() error {
	tok, err := d.dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case nil: // null: nothing, as json.Unmarshal reads it
	case json.Delim('{'):
		for d.dec.More() {
			tok, err := d.dec.Token()
			if err != nil {
				return err
			}
			if key, _ := tok.(string); strings.EqualFold(key, "pdf_info") {
				err = d.pdfInfo()
			} else {
				err = d.skip()
			}
			if err != nil {
				return err
			}
		}
		if _, err := d.dec.Token(); err != nil {
			return err
		}
	default:
		d.docErr = errors.New("the document is not an object")
		if err := d.skipOpened(tok); err != nil {
			return err
		}
	}
	switch _, err := d.dec.Token(); {
	case err == io.EOF:
		return nil
	case err != nil:
		return err
	}
	return errors.New("data after the document")
}

// pdfInfo reads the pages; a repeated pdf_info replaces the one before.
func (d *middleReader) pdfInfo() error {
	d.sawInfo, d.pages, d.sizes, d.elements, d.pageErr = false, 0, nil, nil, nil
	tok, err := d.dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case nil:
		return nil
	case json.Delim('['):
	default:
		d.docErr = errors.New("pdf_info is not an array")
		return d.skipOpened(tok)
	}
	d.sawInfo = true
	for ; d.dec.More(); d.pages++ {
		if d.pages >= d.lim.maxPages {
			return bad(errLayoutTooLarge, "middle.json has more than %d pages, the limit (Config.MaxLayoutPages)", d.lim.maxPages)
		}
		if d.pageErr != nil || d.docErr != nil {
			if err := d.skip(); err != nil { // only checked as JSON now
				return err
			}
			continue
		}
		if err := d.page(); err != nil {
			return err
		}
		d.pageErr = d.check(d.pages)
	}
	_, err = d.dec.Token()
	return err
}

// page reads one page into d.pg.
func (d *middleReader) page() error {
	d.pg = page{blocks: d.pg.blocks[:0]}
	pg := &d.pg
	tok, err := d.dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case nil: // an empty page
		return nil
	case json.Delim('{'):
	default:
		pg.typeErr = errors.New("the page is not an object")
		return d.skipOpened(tok)
	}
	for d.dec.More() {
		tok, err := d.dec.Token()
		if err != nil {
			return err
		}
		switch key, _ := tok.(string); {
		case strings.EqualFold(key, "page_idx"):
			err = d.dec.Decode(&pg.idx)
		case strings.EqualFold(key, "page_size"):
			err = d.dec.Decode(&pg.size)
		case strings.EqualFold(key, "para_blocks"):
			err = d.paraBlocks()
		default:
			err = d.skip()
		}
		if err != nil {
			return err
		}
	}
	_, err = d.dec.Token()
	return err
}

// paraBlocks reads para_blocks block by block into d.pg.blocks (a
// repeated para_blocks decodes into the same blocks, as encoding/json
// does), refusing one block past the limit.
func (d *middleReader) paraBlocks() error {
	pg := &d.pg
	tok, err := d.dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case nil:
		pg.blocks = pg.blocks[:0]
		return nil
	case json.Delim('['):
	default:
		d.typeError(errors.New("para_blocks is not an array"))
		return d.skipOpened(tok)
	}
	n := 0
	for ; d.dec.More(); n++ {
		if len(d.elements)+n >= d.lim.maxBlocks {
			return bad(errLayoutTooLarge, "middle.json has more than %d blocks, the limit (Config.MaxLayoutBlocks)", d.lim.maxBlocks)
		}
		if n == len(pg.blocks) {
			pg.blocks = append(pg.blocks, block{})
		}
		err := d.dec.Decode(&pg.blocks[n])
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			d.typeError(err)
			continue
		}
		if err != nil {
			return err
		}
	}
	pg.blocks = pg.blocks[:n]
	_, err = d.dec.Token()
	return err
}

func (d *middleReader) typeError(err error) {
	if d.pg.typeErr == nil {
		d.pg.typeErr = err
	}
}

// check checks page i once it has been read and keeps its size and
// elements.
func (d *middleReader) check(i int) error {
	pg := &d.pg
	if pg.typeErr != nil {
		return bad(ErrBadLayout, "page %d: %v", i, pg.typeErr)
	}
	if len(pg.idx) > 0 && !bytes.Equal(pg.idx, []byte("null")) {
		var idx float64
		if err := json.Unmarshal(pg.idx, &idx); err != nil || idx != float64(i) {
			return bad(ErrBadLayout, "page %d has page_idx %s: the pages are out of sequence", i, clip(pg.idx, 32))
		}
	}
	size, ok := numbers(pg.size, 2)
	if !ok || !(size[0] > 0 && size[1] > 0) {
		return bad(ErrBadGeometry, "page %d: page_size %s is not two positive finite numbers", i, clip(pg.size, 64))
	}
	w, h := size[0], size[1]
	built := make([]LayoutElement, 0, len(pg.blocks))
	for j, b := range pg.blocks {
		v, ok := numbers(b.BBox, 4)
		if !ok {
			return bad(ErrBadGeometry, "page %d block %d (%s): bbox %s is not four finite numbers", i, j, clip([]byte(b.Type), 64), clip(b.BBox, 96))
		}
		if !(v[2] > v[0] && v[3] > v[1]) {
			return bad(ErrBadGeometry, "page %d block %d (%s): degenerate bbox %v (needs x2 > x1 and y2 > y1)", i, j, clip([]byte(b.Type), 64), v)
		}
		if m := d.lim.maxOutside; m >= 0 {
			mw, mh := m*w, m*h
			if v[2] < -mw || v[0] > w+mw || v[3] < -mh || v[1] > h+mh {
				return bad(ErrBadGeometry, "page %d block %d (%s): bbox %v lies far outside the %gx%g page", i, j, clip([]byte(b.Type), 64), v, w, h)
			}
		}
		built = append(built, LayoutElement{Type: b.Type, BBox: [4]float64{v[0], v[1], v[2], v[3]}, PageIndex: i})
	}
	d.sizes = append(d.sizes, [2]float64{w, h})
	d.elements = append(d.elements, built...)
	return nil
}

// skip reads a value nobody needs: an array element by element (more
// than MaxLayoutBlocks of them is refused), an object member by member,
// each element or member value whole, checked as JSON all the same.
func (d *middleReader) skip() error {
	tok, err := d.dec.Token()
	if err != nil {
		return err
	}
	return d.skipOpened(tok)
}

// skipOpened is skip after Token returned tok.
func (d *middleReader) skipOpened(tok json.Token) error {
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	for n := 0; d.dec.More(); n++ {
		if delim == '[' && n >= d.lim.maxBlocks {
			return bad(errLayoutTooLarge, "middle.json has an array of more than %d elements, the limit (Config.MaxLayoutBlocks)", d.lim.maxBlocks)
		}
		if delim == '{' {
			if _, err := d.dec.Token(); err != nil { // the key
				return err
			}
		}
		var none struct{}
		err := d.dec.Decode(&none)
		var te *json.UnmarshalTypeError
		if err != nil && !errors.As(err, &te) {
			return err
		}
	}
	_, err := d.dec.Token()
	return err
}

// numbers decodes a JSON array of exactly n finite numbers.
func numbers(raw json.RawMessage, n int) ([]float64, bool) {
	var ptrs []*float64 // a null element stays nil instead of reading as 0
	if len(raw) == 0 || json.Unmarshal(raw, &ptrs) != nil || len(ptrs) != n {
		return nil, false
	}
	v := make([]float64, n)
	for i, f := range ptrs {
		if f == nil || math.IsNaN(*f) || math.IsInf(*f, 0) {
			return nil, false
		}
		v[i] = *f
	}
	return v, true
}

// layoutJSON is the Content of a layout call's response: the counts.
func layoutJSON(pages, elements int) string {
	b, _ := json.Marshal(struct {
		Pages    int `json:"pages"`
		Elements int `json:"elements"`
	}{pages, elements})
	return string(b)
}
