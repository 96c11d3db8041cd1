package ocr

import (
	"bytes"
	"io"
)

// extractMiddle returns the bytes of the *_middle.json that readLayout
// reads from archive: the same member, bounded the same way.
func extractMiddle(archive []byte, cfg Config) ([]byte, error) {
	f, err := openMiddle(archive, cfg)
	if err != nil {
		return nil, err
	}
	rc, err := openMember(f, cfg.MaxMemberBytes)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, memberError(f, cfg.MaxMemberBytes, err)
	}
	return b, nil
}

// parseMiddle reads a whole middle.json with the default limits and the
// given far-outside margin.
func parseMiddle(data []byte, maxOutside float64) ([]LayoutElement, [][2]float64, error) {
	lim := limitsOf(Config{}.withDefaults())
	lim.maxOutside = maxOutside
	return decodeMiddle(bytes.NewReader(data), lim)
}
