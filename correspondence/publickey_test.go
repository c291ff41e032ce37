package correspondence_test

import (
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/acrelay/acrelay/correspondence"
)

func TestDecodePublicKeyRefusesWeakKeys(t *testing.T) {
	hexKey := func(h string) string {
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	cases := []struct {
		name string
		key  string
		ok   bool
	}{
		{"seed test key", "A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg", true},
		{"all zero (order 4)", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", false},
		{"identity point", hexKey("0100000000000000000000000000000000000000000000000000000000000000"), false},
		{"order 2: y = -1", hexKey("ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"), false},
		{"order 8", hexKey("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"), false},
		{"order 8, other", hexKey("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"), false},
		{"non-canonical y ≥ p", hexKey("eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"), false},
		{"not on the curve", hexKey("0200000000000000000000000000000000000000000000000000000000000000"), false},
		{"31 bytes", "A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMQ", false},
		{"padded", "A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg=", false},
		{"CR LF inside", "A6EHv_POEL4dcN0Y50v\r\nAmWfk1jCbpQ1fHdyGZBJVMbg", false},
		{"trailing LF", "A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg\n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := correspondence.DecodePublicKey(tc.key)
			if (err == nil) != tc.ok {
				t.Errorf("DecodePublicKey(%s) err = %v, want ok=%v", tc.key, err, tc.ok)
			}
		})
	}
}
