package core

// ModelPrice is the price of one model per million tokens.
type ModelPrice struct {
	InputPer1M  float64 `json:"input_per_1m"`
	OutputPer1M float64 `json:"output_per_1m"`
	// CachedInputPer1M is the optional price of cached prompt tokens; 0 = same as input.
	CachedInputPer1M float64 `json:"cached_input_per_1m,omitempty"`
}

// PricingTable maps a model name to its price.
type PricingTable map[string]ModelPrice

// Cost returns the cost of a call to model with the given usage, or nil when
// the table has no price for model.
func (p PricingTable) Cost(model string, promptTokens, completionTokens int) *float64 {
	return p.CostCached(model, promptTokens, 0, completionTokens)
}

// CostCached is Cost with cachedTokens of the prompt served from the
// provider's prompt cache, priced at CachedInputPer1M when it is set (else
// at the input price).
func (p PricingTable) CostCached(model string, promptTokens, cachedTokens, completionTokens int) *float64 {
	price, ok := p[model]
	if !ok {
		return nil
	}
	cachedTokens = min(max(cachedTokens, 0), promptTokens)
	cachedPrice := price.CachedInputPer1M
	if cachedPrice == 0 {
		cachedPrice = price.InputPer1M
	}
	c := (float64(promptTokens-cachedTokens)*price.InputPer1M + float64(cachedTokens)*cachedPrice +
		float64(completionTokens)*price.OutputPer1M) / 1e6
	return &c
}

// Price returns model's price and whether the table has one.
func (p PricingTable) Price(model string) (ModelPrice, bool) {
	price, ok := p[model]
	return price, ok
}
