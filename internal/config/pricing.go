package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"

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
	if err := CheckPricing(table, "PGW_PRICING_PATH", strconv.Quote(path)+": "); err != nil {
		return nil, err
	}
	return table, nil
}

// MaxPricePer1M bounds a price per million tokens: far above any model's,
// low enough that no call's cost overflows.
const MaxPricePer1M = 1e9

// CheckPricing refuses a table with a price that is negative, not a
// number, infinite or above MaxPricePer1M, as an error naming key (the
// file's PGW_PRICING_PATH, or WithPricing), its Problem opened by where.
func CheckPricing(table core.PricingTable, key, where string) error {
	for _, model := range slices.Sorted(maps.Keys(table)) {
		p := table[model]
		for _, v := range [...]float64{p.InputPer1M, p.OutputPer1M, p.CachedInputPer1M} {
			switch {
			case v < 0:
				return &Error{Key: key, Problem: fmt.Sprintf("%snegative price for model %q", where, model)}
			case !(v <= MaxPricePer1M): // NaN too
				return &Error{Key: key, Problem: fmt.Sprintf("%sprice of model %q is not a number up to %g per 1M tokens", where, model, float64(MaxPricePer1M))}
			}
		}
	}
	return nil
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
