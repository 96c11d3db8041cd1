package embed

import (
	"slices"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/internal/config"
)

// TestEmbeddingKeysAreTheTablesKeys: the keys parseConfig reads are exactly
// the key table's embedding rows, so the settings parser keeps every one of
// them in Extra and rejects every other name.
func TestEmbeddingKeysAreTheTablesKeys(t *testing.T) {
	t.Parallel()
	var table []string
	for _, d := range config.Keys() {
		if d.Reader == config.ReaderEmbed {
			table = append(table, strings.TrimPrefix(d.Pattern, "{SCOPE}__"))
		}
	}
	slices.Sort(table)
	if !slices.Equal(table, slices.Sorted(slices.Values(knownKeys))) {
		t.Errorf("key table embedding keys %v, parseConfig reads %v", table, knownKeys)
	}
}

// TestUnknownExtraKeySuggests: settings built by hand with a misspelt
// embedding key are refused with the key meant; X_ keys are the user's own.
func TestUnknownExtraKeySuggests(t *testing.T) {
	t.Parallel()
	_, err := parseConfig("EMBED", map[string]string{"BATCH_SIZE": "4", "NORMALISE": "true"})
	if err == nil || !strings.Contains(err.Error(), "EMBED__NORMALISE") || !strings.Contains(err.Error(), "did you mean EMBED__NORMALIZE?") {
		t.Errorf("err = %v", err)
	}
	if _, err := parseConfig("EMBED", map[string]string{"BATCH_SIZE": "4", "X_MINE": "anything"}); err != nil {
		t.Errorf("X_ key refused: %v", err)
	}
}
