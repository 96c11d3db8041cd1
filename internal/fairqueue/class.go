package fairqueue

import "fmt"

// Class is a call's priority class. Lower values are served first.
type Class uint8

// The classes, highest first.
const (
	// Interactive is for a person waiting on the answer.
	Interactive Class = iota
	// Normal is the default.
	Normal
	// Batch is for bulk work that can wait (embeddings, OCR, bulk chat).
	Batch
)

// NumClasses is the number of classes.
const NumClasses = 3

var classNames = [NumClasses]string{"interactive", "normal", "batch"}

// String returns "interactive", "normal" or "batch".
func (c Class) String() string {
	if c < NumClasses {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Valid reports whether c is one of the classes.
func (c Class) Valid() bool { return c < NumClasses }

// ParseClass reads a class by its name ("interactive", "normal", "batch").
func ParseClass(s string) (Class, error) {
	for i, n := range classNames {
		if s == n {
			return Class(i), nil
		}
	}
	return 0, &ClassError{Value: s}
}
