package ocr

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
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

// openMiddle finds the *_middle.json member of a result ZIP held in
// memory. Nothing is written to disk. The central directory is vetted by
// checkDirectory first, so that archive/zip never allocates for more than
// cfg.MaxMembers members. Members with unsafe names (absolute, "..",
// backslashes, drive letters) are ignored; members in subdirectories are
// accepted, the shallowest (then the first by name) winning. A member
// that declares more than cfg.MaxMemberBytes is refused before it is
// opened.
func openMiddle(archive []byte, cfg Config) (*zip.File, error) {
	if err := checkDirectory(archive, cfg.MaxMembers); err != nil {
		return nil, err
	}
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil && (!errors.Is(err, zip.ErrInsecurePath) || zr == nil) {
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
	if best.UncompressedSize64 > uint64(cfg.MaxMemberBytes) {
		return nil, bad(errArchiveTooLarge, "%s declares %d bytes, more than the limit of %d", best.Name, best.UncompressedSize64, cfg.MaxMemberBytes)
	}
	return best, nil
}

// openMember opens f for reading, bounded by limit bytes whatever its
// header declares (errMemberTooLarge past them).
func openMember(f *zip.File, limit int64) (io.ReadCloser, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, bad(ErrBadArchive, "cannot open %s: %v", f.Name, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{&boundedReader{r: rc, left: limit}, rc}, nil
}

// memberError is the error of a member that failed while it was read.
func memberError(f *zip.File, limit int64, err error) error {
	if errors.Is(err, errMemberTooLarge) {
		return bad(errArchiveTooLarge, "%s inflates beyond the limit of %d bytes", f.Name, limit)
	}
	return bad(ErrBadArchive, "cannot read %s: %v", f.Name, err)
}

// errMemberTooLarge is boundedReader's error past its limit.
var errMemberTooLarge = errors.New("ocr: member too large")

// boundedReader reads at most left bytes of r; if r has more, the read
// that would go past them fails with errMemberTooLarge.
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.left <= 0 {
		var one [1]byte
		n, err := io.ReadFull(b.r, one[:])
		if n > 0 {
			return 0, errMemberTooLarge
		}
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// readLayout reads the layout of a result ZIP held in memory: its
// *_middle.json (openMiddle) is inflated into the decoder as it is read
// (decodeMiddle), and kept as the raw document. A layout past
// cfg.MaxLayoutPages or MaxLayoutBlocks ends the reading at once.
func readLayout(archive []byte, cfg Config) ([]LayoutElement, [][2]float64, []byte, error) {
	f, err := openMiddle(archive, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	rc, err := openMember(f, cfg.MaxMemberBytes)
	if err != nil {
		return nil, nil, nil, err
	}
	defer rc.Close()
	var raw bytes.Buffer
	elements, sizes, err := decodeMiddle(io.TeeReader(rc, &raw), limitsOf(cfg))
	var rf *readFailure
	if errors.As(err, &rf) {
		return nil, nil, nil, memberError(f, cfg.MaxMemberBytes, rf.err)
	}
	return elements, sizes, raw.Bytes(), err
}

// ZIP record layouts (APPNOTE.TXT 4.3.12, 4.3.14–16).
const (
	sigCentralHeader = 0x02014b50
	sigEnd           = 0x06054b50
	sigEnd64         = 0x06064b50
	sigEnd64Locator  = 0x07064b50
	lenCentralHeader = 46
	lenEnd           = 22
	lenEnd64         = 56
	lenEnd64Locator  = 20
)

// checkDirectory refuses, without allocating, an archive whose central
// directory holds or announces more than maxMembers members, or announces
// more directory bytes than the archive has. It reads the
// end-of-central-directory record (and the ZIP64 one it points to) the way
// archive/zip finds them, then counts the central headers archive/zip
// would read — it reads until the first malformed header, whatever the
// count announced, and from one of two start offsets — stopping at
// maxMembers+1. Archives that archive/zip cannot open are left for it to
// refuse.
func checkDirectory(b []byte, maxMembers int) error {
	size := int64(len(b))
	end := findEnd(b)
	if end < 0 {
		return nil // no end record: archive/zip refuses it
	}
	records := uint64(binary.LittleEndian.Uint16(b[end+10:]))
	dirSize := uint64(binary.LittleEndian.Uint32(b[end+12:]))
	dirOffset := uint64(binary.LittleEndian.Uint32(b[end+16:]))
	endOffset := end
	// The same condition as archive/zip's for looking for ZIP64 records.
	if records == 0xffff || dirSize == 0xffff || dirOffset == 0xffffffff {
		if loc := end - lenEnd64Locator; loc >= 0 && binary.LittleEndian.Uint32(b[loc:]) == sigEnd64Locator &&
			binary.LittleEndian.Uint32(b[loc+4:]) == 0 && binary.LittleEndian.Uint32(b[loc+16:]) == 1 {
			p := binary.LittleEndian.Uint64(b[loc+8:])
			if size < lenEnd64 || p > uint64(size-lenEnd64) || binary.LittleEndian.Uint32(b[p:]) != sigEnd64 {
				return nil // archive/zip refuses a missing ZIP64 end record
			}
			endOffset = int64(p)
			records = binary.LittleEndian.Uint64(b[p+32:])
			dirSize = binary.LittleEndian.Uint64(b[p+40:])
			dirOffset = binary.LittleEndian.Uint64(b[p+48:])
		}
	}
	if records > uint64(maxMembers) {
		return bad(errArchiveTooLarge, "the result archive announces %d members, more than the limit of %d", records, maxMembers)
	}
	if dirSize > uint64(size) || dirOffset > uint64(size) {
		return bad(ErrBadArchive, "the result archive announces a central directory of %d bytes at offset %d in %d bytes", dirSize, dirOffset, size)
	}
	starts := []int64{endOffset - int64(dirSize)} // base offset + directory offset
	if base := endOffset - int64(dirSize) - int64(dirOffset); base > 0 {
		starts = append(starts, int64(dirOffset)) // archive/zip may fall back to base 0
	}
	for _, off := range starts {
		if n := countHeaders(b, off, maxMembers+1); n > maxMembers {
			return bad(errArchiveTooLarge, "the result archive has more than %d members", maxMembers)
		}
	}
	return nil
}

// findEnd returns the offset of the end-of-central-directory record as
// archive/zip finds it (the last signature in the final 1 KiB, else in the
// final 65 KiB, whose comment fits), or -1.
func findEnd(b []byte) int64 {
	for _, n := range []int{1024, 65 * 1024} {
		n = min(n, len(b))
		block := b[len(b)-n:]
		for i := len(block) - lenEnd; i >= 0; i-- {
			if binary.LittleEndian.Uint32(block[i:]) != sigEnd {
				continue
			}
			if i+lenEnd+int(binary.LittleEndian.Uint16(block[i+20:])) > len(block) {
				return -1
			}
			return int64(len(b) - n + i)
		}
		if n == len(b) {
			break
		}
	}
	return -1
}

// countHeaders counts the consecutive complete central directory headers
// starting at off, stopping at limit.
func countHeaders(b []byte, off int64, limit int) int {
	if off < 0 {
		return 0
	}
	size := int64(len(b))
	n := 0
	for n < limit && off+lenCentralHeader <= size && binary.LittleEndian.Uint32(b[off:]) == sigCentralHeader {
		next := off + lenCentralHeader + int64(binary.LittleEndian.Uint16(b[off+28:])) +
			int64(binary.LittleEndian.Uint16(b[off+30:])) + int64(binary.LittleEndian.Uint16(b[off+32:]))
		if next > size {
			break
		}
		n, off = n+1, next
	}
	return n
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
