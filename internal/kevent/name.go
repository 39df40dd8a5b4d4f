package kevent

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxLen is the longest valid DNS-1123 subdomain.
const MaxLen = 253

// hashLen is how many hex digits of the object name's SHA-256 a shortened
// name carries, so two long names with the same beginning stay apart.
const hashLen = 8

// maxSuffix bounds the part after the object so a shortened name always
// keeps some of the object's own name.
const maxSuffix = 64

// Name returns "<object>.<suffix>" when that is a valid name, and otherwise a
// valid name that starts with as much of object as fits, followed by '-' and
// eight hex digits of the SHA-256 of object, then ".<suffix>". The result is
// always a valid DNS-1123 subdomain of at most MaxLen characters, whatever
// the input.
func Name(object, suffix string) string {
	if !Valid(suffix) || len(suffix) > maxSuffix {
		suffix = clean(suffix, maxSuffix)
	}
	if suffix == "" {
		suffix = "event"
	}
	if name := object + "." + suffix; Valid(name) {
		return name
	}
	sum := sha256.Sum256([]byte(object))
	hash := hex.EncodeToString(sum[:])[:hashLen]
	keep := MaxLen - len(suffix) - 1 - hashLen - 1
	prefix := clean(object, keep)
	if prefix == "" {
		return "x" + hash + "." + suffix
	}
	return prefix + "-" + hash + "." + suffix
}

// clean lower-cases s, maps every character outside [a-z0-9] to '-', cuts it
// to at most max characters and trims '-' at both ends, so the result is
// one valid DNS-1123 label-like part (possibly empty).
func clean(s string, max int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if b.Len() >= max {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// Valid reports whether name is a DNS-1123 subdomain: 1 to MaxLen
// characters of [a-z0-9.-], where every dot-separated part is non-empty and
// starts and ends with a letter or digit.
func Valid(name string) bool {
	if name == "" || len(name) > MaxLen {
		return false
	}
	for _, part := range strings.Split(name, ".") {
		if part == "" || !alnum(part[0]) || !alnum(part[len(part)-1]) {
			return false
		}
		for i := 0; i < len(part); i++ {
			if !alnum(part[i]) && part[i] != '-' {
				return false
			}
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
