package ocr

import (
	"bytes"
	"encoding/json"
	"math"
)

// parseMiddle reads the pages of a *_middle.json: page sizes from
// page_size, elements from para_blocks (type, bbox, page index), and checks
// the geometry (see ErrBadGeometry). maxOutside < 0 turns the far-outside
// check off.
func parseMiddle(data []byte, maxOutside float64) ([]LayoutElement, [][2]float64, error) {
	var doc struct {
		PdfInfo *[]json.RawMessage `json:"pdf_info"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, bad(ErrBadLayout, "middle.json is not a JSON object with pdf_info: %v", err)
	}
	if doc.PdfInfo == nil {
		return nil, nil, bad(ErrBadLayout, "middle.json has no pdf_info")
	}
	pages := *doc.PdfInfo
	if len(pages) == 0 {
		return nil, nil, bad(ErrBadLayout, "middle.json has no pages")
	}
	sizes := make([][2]float64, len(pages))
	var elements []LayoutElement
	for i, raw := range pages {
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
		if len(pg.PageIdx) > 0 && !bytes.Equal(pg.PageIdx, []byte("null")) {
			var idx float64
			if err := json.Unmarshal(pg.PageIdx, &idx); err != nil || idx != float64(i) {
				return nil, nil, bad(ErrBadLayout, "page %d has page_idx %s: the pages are out of sequence", i, clip(pg.PageIdx, 32))
			}
		}
		size, ok := numbers(pg.PageSize, 2)
		if !ok || !(size[0] > 0 && size[1] > 0) {
			return nil, nil, bad(ErrBadGeometry, "page %d: page_size %s is not two positive finite numbers", i, clip(pg.PageSize, 64))
		}
		w, h := size[0], size[1]
		sizes[i] = [2]float64{w, h}
		for j, b := range pg.ParaBlocks {
			v, ok := numbers(b.BBox, 4)
			if !ok {
				return nil, nil, bad(ErrBadGeometry, "page %d block %d (%s): bbox %s is not four finite numbers", i, j, clip([]byte(b.Type), 64), clip(b.BBox, 96))
			}
			if !(v[2] > v[0] && v[3] > v[1]) {
				return nil, nil, bad(ErrBadGeometry, "page %d block %d (%s): degenerate bbox %v (needs x2 > x1 and y2 > y1)", i, j, clip([]byte(b.Type), 64), v)
			}
			if maxOutside >= 0 {
				mw, mh := maxOutside*w, maxOutside*h
				if v[2] < -mw || v[0] > w+mw || v[3] < -mh || v[1] > h+mh {
					return nil, nil, bad(ErrBadGeometry, "page %d block %d (%s): bbox %v lies far outside the %gx%g page", i, j, clip([]byte(b.Type), 64), v, w, h)
				}
			}
			elements = append(elements, LayoutElement{Type: b.Type, BBox: [4]float64{v[0], v[1], v[2], v[3]}, PageIndex: i})
		}
	}
	if elements == nil {
		elements = []LayoutElement{}
	}
	return elements, sizes, nil
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
