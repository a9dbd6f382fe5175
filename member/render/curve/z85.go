package curve

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// z85Alphabet maps a base-85 digit to its character (ZeroMQ RFC 32).
const z85Alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

// z85Digits maps a character back to its digit, or -1.
var z85Digits = func() [256]int8 {
	var d [256]int8
	for i := range d {
		d[i] = -1
	}
	for i := range len(z85Alphabet) {
		d[z85Alphabet[i]] = int8(i)
	}
	return d
}()

// ErrZ85Length is returned for input whose length Z85 cannot encode or decode: binary data
// must be a multiple of 4 bytes, text a multiple of 5 characters.
var ErrZ85Length = errors.New("z85: length is not a multiple of 4 bytes (or 5 characters)")

// EncodeZ85 encodes src as Z85 (ZeroMQ RFC 32): every 4 bytes, read as a big-endian number,
// become 5 base-85 digits, most significant first. len(src) must be a multiple of 4.
func EncodeZ85(src []byte) (string, error) {
	if len(src)%4 != 0 {
		return "", ErrZ85Length
	}
	dst := make([]byte, len(src)/4*5)
	for i, j := 0, 0; i < len(src); i, j = i+4, j+5 {
		v := binary.BigEndian.Uint32(src[i:])
		for k := 4; k >= 0; k-- {
			dst[j+k] = z85Alphabet[v%85]
			v /= 85
		}
	}
	return string(dst), nil
}

// DecodeZ85 decodes Z85 text. len(s) must be a multiple of 5, every character must be a Z85
// digit, and every group of 5 must stay below 2^32. Errors name the position but not the
// text, which may be a secret key.
func DecodeZ85(s string) ([]byte, error) {
	if len(s)%5 != 0 {
		return nil, ErrZ85Length
	}
	dst := make([]byte, len(s)/5*4)
	for i, j := 0, 0; i < len(s); i, j = i+5, j+4 {
		var v uint64
		for k := range 5 {
			d := z85Digits[s[i+k]]
			if d < 0 {
				return nil, fmt.Errorf("z85: invalid character at position %d", i+k)
			}
			v = v*85 + uint64(d)
		}
		if v > 0xFFFFFFFF {
			return nil, fmt.Errorf("z85: group at position %d is out of range", i)
		}
		binary.BigEndian.PutUint32(dst[j:], uint32(v))
	}
	return dst, nil
}
