package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/polygateway/polygateway/core"
)

// maxPricingBytes bounds a pricing file (1 MiB, as a configuration file):
// a larger one is refused once that much is read, before it is parsed.
const maxPricingBytes = 1 << 20

// LoadPricing reads a pricing JSON file of the form
// {"model": {"input_per_1m": 2.1, "output_per_1m": 8.4}}. A file larger
// than 1 MiB, an unknown field (a misspelt price would read as 0), a model
// priced twice and a negative price are errors naming PGW_PRICING_PATH.
func LoadPricing(path string) (core.PricingTable, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{Key: "PGW_PRICING_PATH", Problem: fmt.Sprintf("cannot read %q: %v", path, err)}
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxPricingBytes+1))
	switch {
	case err != nil:
		return nil, &Error{Key: "PGW_PRICING_PATH", Problem: fmt.Sprintf("cannot read %q: %v", path, err)}
	case len(raw) > maxPricingBytes:
		return nil, &Error{Key: "PGW_PRICING_PATH", Problem: fmt.Sprintf("%q is larger than %d bytes", path, maxPricingBytes)}
	}
	table, err := decodePricing(raw)
	if err != nil {
		return nil, &Error{Key: "PGW_PRICING_PATH", Problem: fmt.Sprintf("%q is not a pricing table ({\"model\": {\"input_per_1m\": n, \"output_per_1m\": n}}): %v", path, err)}
	}
	for model, p := range table {
		if p.InputPer1M < 0 || p.OutputPer1M < 0 || p.CachedInputPer1M < 0 {
			return nil, &Error{Key: "PGW_PRICING_PATH", Problem: fmt.Sprintf("%q: negative price for model %q", path, model)}
		}
	}
	return table, nil
}

// decodePricing decodes a pricing table, refusing unknown fields, a model
// named twice and anything after the table.
func decodePricing(raw []byte) (core.PricingTable, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if tok, err := dec.Token(); err != nil {
		return nil, err
	} else if tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	table := core.PricingTable{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		model, _ := tok.(string) // an object's key is a string
		if _, dup := table[model]; dup {
			return nil, fmt.Errorf("model %q is priced twice", model)
		}
		var p core.ModelPrice
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("model %q: %w", model, err)
		}
		table[model] = p
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the table")
	}
	return table, nil
}
