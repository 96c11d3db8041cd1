package ocr

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/polygateway/polygateway/internal/redact"
)

// badResult is a result that cannot be read; kind is one of ErrBadArchive,
// ErrBadLayout, ErrBadGeometry.
type badResult struct {
	kind error
	msg  string
}

func (b *badResult) Error() string { return b.msg }

func bad(kind error, format string, args ...any) error {
	return &badResult{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// asInvalid turns a badResult into the ResultInvalidError of source.
func asInvalid(rd *redact.Redactor, source string, raw []byte, err error) error {
	var b *badResult
	if errors.As(err, &b) {
		return invalid(rd, source, b.kind, raw, "%s", b.msg)
	}
	return invalid(rd, source, ErrBadArchive, raw, "%v", err)
}

// middleSuffix names the member that carries boxes and page sizes.
const middleSuffix = "_middle.json"

// extractMiddle finds the *_middle.json member of a result ZIP held in
// memory and returns its content. Nothing is written to disk. Members with
// unsafe names (absolute, "..", backslashes, drive letters) are ignored;
// members in subdirectories are accepted, the shallowest (then the first
// by name) winning. Only the chosen member is decompressed, bounded by
// cfg.MaxMemberBytes whatever its header declares.
func extractMiddle(archive []byte, cfg Config) ([]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil && !(errors.Is(err, zip.ErrInsecurePath) && zr != nil) {
		return nil, bad(ErrBadArchive, "the result is not a ZIP archive: %v", err)
	}
	if len(zr.File) > cfg.MaxMembers {
		return nil, bad(errArchiveTooLarge, "the result archive has %d members, more than the limit of %d", len(zr.File), cfg.MaxMembers)
	}
	var best *zip.File
	bestDepth := 0
	for _, f := range zr.File {
		name := f.Name
		if !safeName(name) || strings.HasSuffix(name, "/") {
			continue
		}
		if base := path.Base(name); !strings.HasSuffix(base, middleSuffix) && base != "middle.json" {
			continue
		}
		depth := strings.Count(name, "/")
		if best == nil || depth < bestDepth || depth == bestDepth && name < best.Name {
			best, bestDepth = f, depth
		}
	}
	if best == nil {
		return nil, bad(ErrBadArchive, "no *%s in the result archive (members: %s)", middleSuffix, memberList(zr.File))
	}
	limit := cfg.MaxMemberBytes
	if best.UncompressedSize64 > uint64(limit) {
		return nil, bad(errArchiveTooLarge, "%s declares %d bytes, more than the limit of %d", best.Name, best.UncompressedSize64, limit)
	}
	rc, err := best.Open()
	if err != nil {
		return nil, bad(ErrBadArchive, "cannot open %s: %v", best.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if int64(len(b)) > limit {
		return nil, bad(errArchiveTooLarge, "%s inflates beyond the limit of %d bytes", best.Name, limit)
	}
	if err != nil {
		return nil, bad(ErrBadArchive, "cannot read %s: %v", best.Name, err)
	}
	return b, nil
}

// safeName reports whether a member name is a plain relative path: no
// leading slash, no drive letter, no backslash, no "." or ".." element.
func safeName(name string) bool {
	if name == "" || strings.ContainsAny(name, "\\\x00") {
		return false
	}
	if len(name) >= 2 && name[1] == ':' {
		return false
	}
	return fs.ValidPath(strings.TrimSuffix(name, "/"))
}

// memberList names the first members of an archive, for error messages.
func memberList(files []*zip.File) string {
	const show = 8
	names := make([]string, 0, min(len(files), show))
	for i, f := range files {
		if i == show {
			names = append(names, fmt.Sprintf("… %d more", len(files)-show))
			break
		}
		names = append(names, fmt.Sprintf("%q", clip([]byte(f.Name), 128)))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
