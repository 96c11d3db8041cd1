package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/joho/godotenv"
)

// DefaultDotEnv is the .env file ReadEnv reads when dotenvPath is empty.
const DefaultDotEnv = ".env"

// ReadEnv returns the configuration map: the keys of the .env file at
// dotenvPath (DefaultDotEnv when empty), overlaid by the process environment,
// which wins, even when a variable is set to the empty string.
//
// When explicit is false a missing file is not an error (the process
// environment alone is returned); when true it is a *Error naming the path.
// Any other failure to read or parse the file is a *Error whose Key is the
// path. Parse errors report the line but never its text, which may hold a
// secret.
//
// The file is parsed by github.com/joho/godotenv: "export " prefixes,
// comments and quotes are understood, and $VAR / ${VAR} in unquoted or
// double-quoted values expand to earlier keys of the same file; put values
// containing "$" in single quotes. A leading UTF-8 byte order mark (which
// some Windows editors write) is skipped.
func ReadEnv(dotenvPath string, explicit bool) (map[string]string, error) {
	path := dotenvPath
	if path == "" {
		path = DefaultDotEnv
	}
	env := map[string]string{}
	src, err := os.ReadFile(path)
	switch {
	case err == nil:
		src = bytes.TrimPrefix(src, []byte("\ufeff"))
		parsed, perr := godotenv.UnmarshalBytes(src)
		if perr != nil {
			return nil, &Error{Key: path, Problem: dotenvProblem(src, perr)}
		}
		env = parsed
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		// No .env file: the process environment alone.
	case errors.Is(err, fs.ErrNotExist):
		return nil, &Error{Key: path, Problem: ".env file not found", Err: err}
	default:
		return nil, &Error{Key: path, Problem: "cannot read .env file: " + pathProblem(err), Err: err}
	}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	return env, nil
}

// pathProblem is the reason of a file error without repeating the path.
func pathProblem(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// dotenvProblem words a godotenv parse error. godotenv's own messages quote
// the rest of the file, secrets included, so only the kind of problem and,
// where it can be found, the line number are kept.
func dotenvProblem(src []byte, err error) string {
	src = bytes.ReplaceAll(src, []byte("\r\n"), []byte("\n"))
	msg := err.Error()
	line := 0
	kind := "malformed line"
	switch {
	case strings.HasPrefix(msg, "unexpected character "):
		// `unexpected character "x" in variable name near "<rest of file>"`
		kind = "invalid character in a variable name"
		if i := strings.LastIndex(msg, ` near `); i >= 0 {
			if rest, uerr := strconv.Unquote(msg[i+len(` near `):]); uerr == nil && bytes.HasSuffix(src, []byte(rest)) {
				line = 1 + bytes.Count(src[:len(src)-len(rest)], []byte("\n"))
			}
		}
	case strings.HasPrefix(msg, "unterminated quoted value "):
		kind = "unterminated quoted value"
		if i := bytes.Index(src, []byte(strings.TrimPrefix(msg, "unterminated quoted value "))); i >= 0 {
			line = 1 + bytes.Count(src[:i], []byte("\n"))
		}
	case msg == "zero length string":
		kind = "empty variable name"
	}
	if line > 0 {
		return fmt.Sprintf("cannot parse .env file: %s on line %d (line not shown)", kind, line)
	}
	return "cannot parse .env file: " + kind + " (line not shown)"
}
