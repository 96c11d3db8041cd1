package ocrfake

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"strings"
)

// number is a float written as an integer when it is integral, the way the
// real server writes boxes.
type number float64

func (n number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return json.Marshal(int64(f))
	}
	return json.Marshal(f)
}

func box(b []float64) []number {
	out := make([]number, len(b))
	for i, v := range b {
		out[i] = number(v)
	}
	return out
}

// imageName is the images/<sha256>.jpg name of an image or table block.
func imageName(page, idx int, b Block) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{b.Type, b.Text, string(rune('a' + page)), string(rune('a' + idx))}, "|")))
	return hex.EncodeToString(sum[:]) + ".jpg"
}

// blockJSON renders one para block as the real middle.json does: text-like
// blocks have lines[].spans[]; image and table blocks have child blocks.
func blockJSON(page, idx int, b Block) map[string]any {
	bb := box(b.BBox)
	m := map[string]any{"type": b.Type, "bbox": bb, "index": idx}
	line := func(span map[string]any) []any {
		return []any{map[string]any{"bbox": bb, "spans": []any{span}, "index": idx}}
	}
	switch b.Type {
	case "image":
		m["blocks"] = []any{
			map[string]any{"type": "image_body", "bbox": bb, "index": idx, "lines": line(map[string]any{
				"bbox": bb, "type": "image", "image_path": imageName(page, idx, b)})},
			map[string]any{"type": "image_caption", "bbox": bb, "index": idx, "lines": line(map[string]any{
				"bbox": bb, "type": "text", "content": b.Text})},
		}
	case "table":
		m["blocks"] = []any{
			map[string]any{"type": "table_caption", "bbox": bb, "index": idx, "lines": line(map[string]any{
				"bbox": bb, "type": "text", "content": b.Text})},
			map[string]any{"type": "table_body", "bbox": bb, "index": idx, "lines": line(map[string]any{
				"bbox": bb, "type": "table", "html": "<table><tr><td>" + b.Text + "</td></tr></table>",
				"image_path": imageName(page, idx, b)})},
		}
	case "interline_equation":
		m["lines"] = line(map[string]any{"bbox": bb, "type": "interline_equation", "content": b.Text})
	default:
		m["lines"] = line(map[string]any{"bbox": bb, "type": "text", "content": b.Text})
	}
	return m
}

// MiddleJSON renders pages as the *_middle.json of the real server.
func MiddleJSON(pages []Page) []byte {
	info := make([]any, len(pages))
	for i, p := range pages {
		blocks := make([]any, len(p.Blocks))
		var images, tables, equations []any
		for j, b := range p.Blocks {
			blocks[j] = blockJSON(i, j, b)
			switch b.Type {
			case "image":
				images = append(images, blocks[j])
			case "table":
				tables = append(tables, blocks[j])
			case "interline_equation":
				equations = append(equations, blocks[j])
			}
		}
		discarded := make([]any, len(p.Discarded))
		for j, b := range p.Discarded {
			d := blockJSON(i, j, b)
			d["type"] = "discarded"
			discarded[j] = d
		}
		info[i] = map[string]any{
			"preproc_blocks":      blocks,
			"layout_bboxes":       []any{},
			"page_idx":            i,
			"page_size":           []float64{p.Size[0], p.Size[1]},
			"_layout_tree":        []any{},
			"images":              nonNil(images),
			"tables":              nonNil(tables),
			"interline_equations": nonNil(equations),
			"discarded_blocks":    discarded,
			"need_drop":           false,
			"drop_reason":         []any{},
			"para_blocks":         blocks,
		}
	}
	b, _ := json.Marshal(map[string]any{"pdf_info": info, "_parse_type": "ocr", "_version_name": "0.0.1"})
	return b
}

func nonNil(v []any) []any {
	if v == nil {
		return []any{}
	}
	return v
}

// contentList renders the *_content_list.json: text and types per page,
// no boxes and no page sizes.
func contentList(pages []Page) []byte {
	var items []any
	for i, p := range pages {
		for j, b := range p.Blocks {
			item := map[string]any{"type": b.Type, "page_idx": i}
			switch b.Type {
			case "image":
				item["img_path"] = "images/" + imageName(i, j, b)
				item["img_caption"] = []string{b.Text}
			case "table":
				item["img_path"] = "images/" + imageName(i, j, b)
				item["table_caption"] = []string{b.Text}
				item["table_body"] = "<table><tr><td>" + b.Text + "</td></tr></table>"
			case "title":
				item["type"] = "text"
				item["text"] = b.Text
				item["text_level"] = 1
			default:
				item["type"] = "text"
				item["text"] = b.Text
			}
			items = append(items, item)
		}
	}
	b, _ := json.Marshal(nonNil(items))
	return b
}

func markdown(pages []Page) []byte {
	var sb strings.Builder
	for i, p := range pages {
		for j, b := range p.Blocks {
			switch b.Type {
			case "title":
				sb.WriteString("# " + b.Text + "\n\n")
			case "image", "table":
				sb.WriteString("![](images/" + imageName(i, j, b) + ")\n" + b.Text + "\n\n")
			default:
				sb.WriteString(b.Text + "\n\n")
			}
		}
	}
	return []byte(sb.String())
}

// minimalPDF stands in for the visualisation PDFs.
var minimalPDF = []byte("%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")

// buildArchive writes the result ZIP of one /parse and returns it with the
// "files" list of the response.
func buildArchive(name string, pages []Page, f Faults) ([]byte, []string, error) {
	if f.DegenerateBBox && len(pages) > 0 && len(pages[0].Blocks) > 0 {
		pages = append([]Page(nil), pages...)
		p := pages[0]
		p.Blocks = cloneBlocks(p.Blocks)
		b := &p.Blocks[0]
		if len(b.BBox) == 4 {
			b.BBox[0], b.BBox[2] = b.BBox[2]+10, b.BBox[0]
		} else {
			b.BBox = []float64{100, 100, 50, 200}
		}
		pages[0] = p
	}
	middle := MiddleJSON(pages)
	if f.MiddleJSON != nil {
		middle = f.MiddleJSON
	}
	type entry struct {
		name string
		data []byte
	}
	entries := []entry{
		{name + ".md", markdown(pages)},
		{name + "_content_list.json", contentList(pages)},
	}
	if !f.NoMiddleJSON {
		entries = append(entries, entry{name + "_middle.json", middle})
	}
	entries = append(entries,
		entry{name + "_model.pdf", minimalPDF},
		entry{name + "_layout.pdf", minimalPDF},
		entry{name + "_spans.pdf", minimalPDF},
	)
	for i, p := range pages {
		for j, b := range p.Blocks {
			if b.Type == "image" || b.Type == "table" {
				entries = append(entries, entry{"images/" + imageName(i, j, b), []byte("\xff\xd8\xff\xe0fake jpeg\xff\xd9")})
			}
		}
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	files := make([]string, 0, len(entries))
	for _, e := range entries {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: zip.Deflate})
		if err != nil {
			return nil, nil, err
		}
		if _, err := w.Write(e.data); err != nil {
			return nil, nil, err
		}
		files = append(files, e.name)
	}
	for _, m := range f.ExtraMembers {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: m.Name, Method: zip.Deflate})
		if err != nil {
			return nil, nil, err
		}
		if m.Data != nil {
			_, err = w.Write(m.Data)
		} else if m.Zeros > 0 {
			_, err = io.CopyN(w, zeroReader{}, m.Zeros)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), files, nil
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
