package curve

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// The example keypairs of libzmq's zmq_curve(7), a server's and a client's.
const (
	serverPublic = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"
	serverSecret = "D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs"
	clientPublic = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
	clientSecret = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"
)

// fixedEntropy returns KeySize bytes that make the same keypair on every run.
func fixedEntropy() *bytes.Reader {
	b := make([]byte, KeySize)
	for i := range b {
		b[i] = byte(7*i + 3)
	}
	return bytes.NewReader(b)
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create %s", path)
	require.Equal(t, string(want), string(got))
}

func TestZ85(t *testing.T) {
	tests := []struct {
		name string
		raw  []byte
		text string
	}{
		{name: "rfc32 test vector", raw: []byte{0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B}, text: "HelloWorld"},
		{name: "empty", raw: []byte{}, text: ""},
		{name: "zeros", raw: []byte{0, 0, 0, 0}, text: "00000"},
		{name: "largest group", raw: []byte{0xff, 0xff, 0xff, 0xff}, text: "%nSc0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EncodeZ85(tt.raw)
			require.NoError(t, err)
			require.Equal(t, tt.text, got)
			back, err := DecodeZ85(tt.text)
			require.NoError(t, err)
			require.Equal(t, tt.raw, back)
		})
	}
}

func TestZ85Errors(t *testing.T) {
	_, err := EncodeZ85([]byte{1, 2, 3})
	require.ErrorIs(t, err, ErrZ85Length)
	tests := []struct {
		name string
		text string
		want string
	}{
		{name: "length", text: "Hello", want: ""},
		{name: "short", text: "Hell", want: "z85: length"},
		{name: "character outside the alphabet", text: "Hel_o", want: "z85: invalid character at position 3"},
		{name: "quote", text: `Hello"orld`, want: "z85: invalid character at position 5"},
		{name: "non-ASCII", text: "Hell\xff", want: "z85: invalid character at position 4"},
		{name: "group above 2^32", text: "00000#####", want: "z85: group at position 5 is out of range"},
		{name: "just above 2^32", text: "%nSc1", want: "z85: group at position 0 is out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeZ85(tt.text)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestGenerate(t *testing.T) {
	c, err := Generate(fixedEntropy(), KeygenMetadata("flux-sample", "fluxfed", time.Date(2025, 3, 4, 5, 6, 7, 0, time.FixedZone("x", 3600)))...)
	require.NoError(t, err)
	golden(t, "generated.cert", File(c))
	require.Equal(t, []Metadata{
		{Key: "name", Value: "flux-sample"},
		{Key: "keygen.hostname", Value: "fluxfed"},
		{Key: "keygen.time", Value: "2025-03-04T04:06:07"},
	}, c.Metadata())

	again, err := Generate(fixedEntropy(), c.Metadata()...)
	require.NoError(t, err)
	require.True(t, c.Equal(again), "the same entropy makes the same certificate")

	other, err := Generate(bytes.NewReader(bytes.Repeat([]byte{1}, KeySize)))
	require.NoError(t, err)
	require.False(t, c.Equal(other))
	require.NotEqual(t, c.PublicKey(), other.PublicKey())
	require.Empty(t, other.Metadata())
	require.Contains(t, string(File(other)), "metadata\ncurve\n", "the metadata section is written even when empty")
}

func TestGenerateErrors(t *testing.T) {
	tests := []struct {
		name     string
		entropy  *bytes.Reader
		metadata []Metadata
		want     string
	}{
		{name: "short entropy", entropy: bytes.NewReader(make([]byte, KeySize-1)), want: "reading entropy for a CURVE key: unexpected EOF"},
		{name: "key with a space", metadata: []Metadata{{Key: "my key", Value: "x"}}, want: `metadata key "my key"`},
		{name: "empty key", metadata: []Metadata{{Key: "", Value: "x"}}, want: `metadata key ""`},
		{name: "value with an underscore", metadata: []Metadata{{Key: "name", Value: "flux_sample"}}, want: "metadata name: the value may only hold"},
		{name: "value with a quote", metadata: []Metadata{{Key: "name", Value: `a"b`}}, want: "metadata name: the value may only hold"},
		{name: "line too long", metadata: []Metadata{{Key: "name", Value: strings.Repeat("a", 243)}}, want: "the line would be 256 bytes"},
		{name: "duplicate key", metadata: []Metadata{{Key: "name", Value: "a"}, {Key: "name", Value: "b"}}, want: `metadata key "name" given twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entropy := tt.entropy
			if entropy == nil {
				entropy = fixedEntropy()
			}
			_, err := Generate(entropy, tt.metadata...)
			require.ErrorContains(t, err, tt.want)
		})
	}
	_, err := Generate(iotest.ErrReader(errors.New("no entropy")))
	require.ErrorContains(t, err, "no entropy")
	_, err = Generate(fixedEntropy(), Metadata{Key: "name", Value: strings.Repeat("a", 242)})
	require.NoError(t, err, "a line of 255 bytes fits")
}

// keygenFile is a certificate in the layout flux keygen writes, with libzmq's example server
// keypair.
const keygenFile = `#  ZeroMQ CURVE **Secret** Certificate
#  DO NOT DISTRIBUTE

metadata
    name = "kind-worker2"
    keygen.flux-core-version = "0.64.0"
    keygen.hostname = "kind-worker2"
    keygen.time = "2024-10-28T13:30:32"
    keygen.userid = "0"
    keygen.zmq-version = "4.3.5"
curve
    public-key = "` + serverPublic + `"
    secret-key = "` + serverSecret + `"
`

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		public   string
		metadata []Metadata
	}{
		{name: "flux keygen output", file: keygenFile, public: serverPublic, metadata: []Metadata{
			{Key: "name", Value: "kind-worker2"},
			{Key: "keygen.flux-core-version", Value: "0.64.0"},
			{Key: "keygen.hostname", Value: "kind-worker2"},
			{Key: "keygen.time", Value: "2024-10-28T13:30:32"},
			{Key: "keygen.userid", Value: "0"},
			{Key: "keygen.zmq-version", Value: "4.3.5"},
		}},
		{name: "CZMQ-era header, no trailing newline", file: "#   ****  Generated on 2023-04-26 22:54:42 by CZMQ  ****\n" +
			"#   ZeroMQ CURVE **Secret** Certificate\n#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n    \n" +
			"metadata\n    name = \"flux-cert-generator\"\ncurve\n    public-key = \"" + clientPublic + "\"\n    secret-key = \"" + clientSecret + "\"",
			public: clientPublic, metadata: []Metadata{{Key: "name", Value: "flux-cert-generator"}}},
		{name: "no metadata section, tabs, CRLF and spacing", file: "curve\r\n\tsecret-key=\"" + clientSecret + "\"\r\n\t  public-key   =   \"" + clientPublic + "\"  \r\n",
			public: clientPublic},
		{name: "indented comments and an empty value", file: "metadata\n    # a comment\n    empty = \"\"\n  \t\ncurve\n    public-key = \"" + serverPublic + "\"\n    secret-key = \"" + serverSecret + "\"\n",
			public: serverPublic, metadata: []Metadata{{Key: "empty", Value: ""}}},
		{name: "value with every extra character", file: "metadata\n    x = \".-:+=^!/*?&<>()[]{}@%$# \t\"\ncurve\n    public-key = \"" + serverPublic + "\"\n    secret-key = \"" + serverSecret + "\"\n",
			public: serverPublic, metadata: []Metadata{{Key: "x", Value: ".-:+=^!/*?&<>()[]{}@%$# \t"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.file))
			require.NoError(t, err)
			require.Equal(t, tt.public, c.PublicKey())
			require.Equal(t, tt.metadata, c.Metadata())
			back, err := Parse(File(c))
			require.NoError(t, err)
			require.True(t, c.Equal(back))
		})
	}
}

func TestParseErrors(t *testing.T) {
	curve := func(pub, sec string) string {
		return "curve\n    public-key = \"" + pub + "\"\n    secret-key = \"" + sec + "\"\n"
	}
	tests := []struct {
		name string
		file string
		want string
	}{
		{name: "empty", file: "", want: "curve certificate: has no public-key in a curve section"},
		{name: "comments only", file: "# nothing\n\n", want: "has no public-key"},
		{name: "no secret key", file: "curve\n    public-key = \"" + serverPublic + "\"\n", want: "has no secret-key in a curve section"},
		{name: "mismatched keypair", file: curve(clientPublic, serverSecret), want: "curve certificate: the public-key is not the public key of the secret-key"},
		{name: "short secret key", file: curve(serverPublic, serverSecret[:35]), want: "line 3: secret-key is 35 characters long, not 40 characters of Z85"},
		{name: "long public key", file: curve(serverPublic+"00000", serverSecret), want: "line 2: public-key is 45 characters long"},
		{name: "secret key out of Z85 range", file: curve(serverPublic, "#####"+serverSecret[5:]), want: "line 3: secret-key is not Z85: z85: group at position 0 is out of range"},
		{name: "secret key not Z85", file: curve(serverPublic, "~"+serverSecret[1:]), want: "line 3: secret-key: the value holds a character Flux does not accept"},
		{name: "unknown curve key", file: "curve\n    private-key = \"x\"\n", want: "line 2: the curve section holds only public-key and secret-key, not private-key"},
		{name: "public key twice", file: curve(serverPublic, serverSecret) + "    public-key = \"" + serverPublic + "\"\n", want: "line 4: public-key is given twice"},
		{name: "secret key twice", file: curve(serverPublic, serverSecret) + "    secret-key = \"" + serverSecret + "\"\n", want: "line 4: secret-key is given twice"},
		{name: "metadata twice", file: "metadata\n    name = \"a\"\n    name = \"b\"\n" + curve(serverPublic, serverSecret), want: "line 3: metadata name is given twice"},
		{name: "unindented entry", file: "metadata\nname = \"a\"\n", want: "line 2: is neither a comment, a section name (metadata, curve) nor an indented entry"},
		{name: "unknown section", file: "keys\n", want: "line 1: is neither a comment"},
		{name: "indented section name", file: "metadata\n    curve\n", want: `line 2: is not a key = "value" entry`},
		{name: "entry before a section", file: "    name = \"a\"\n", want: "line 1: is an entry before any section"},
		{name: "unquoted value", file: "metadata\n    name = a\n", want: "line 2: name: the value is not in double quotes"},
		{name: "half-quoted value", file: "metadata\n    name = \"a\n", want: "line 2: name: the value is not in double quotes"},
		{name: "underscore in a value", file: "metadata\n    name = \"a_b\"\n", want: "line 2: name: the value holds a character Flux does not accept"},
		{name: "bad key", file: "metadata\n    my_name = \"a\"\n", want: "line 2: has a key that is not made of letters"},
		{name: "empty key", file: "metadata\n    = \"a\"\n", want: "line 2: has a key that is not made of letters"},
		{name: "line too long", file: "# " + strings.Repeat("x", 254) + "\n", want: "line 1: is 256 bytes long; Flux reads at most 255"},
		{name: "NUL byte", file: "metadata\x00\n", want: "contains a NUL byte"},
		{name: "invalid UTF-8", file: "# \xff\n", want: "is not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.file))
			require.ErrorContains(t, err, tt.want)
			var parseErr *ParseError
			require.ErrorAs(t, err, &parseErr)
			for _, secret := range []string{serverSecret, clientSecret, serverSecret[5:], serverSecret[:35]} {
				require.NotContains(t, err.Error(), secret, "errors never quote the secret key")
			}
		})
	}
}

func TestRedaction(t *testing.T) {
	c, err := Parse([]byte(keygenFile))
	require.NoError(t, err)
	raw, err := DecodeZ85(serverSecret)
	require.NoError(t, err)
	// How fmt prints the key's bytes as numbers, should it ever reach them.
	numbers := make([]string, len(raw))
	for i, b := range raw {
		numbers[i] = strconv.Itoa(int(b))
	}
	rawText := strings.Join(numbers, " ")
	holder := struct {
		Exported   *Certificate
		Value      Certificate
		unexported Certificate
		pointer    *Certificate
	}{c, *c, *c, c}
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T %v", "%10.3v"} {
		for _, arg := range []any{c, *c, holder, &holder, []*Certificate{c}, map[string]Certificate{"k": *c}} {
			got := fmt.Sprintf(format, arg)
			require.NotContains(t, got, serverSecret, "%s of %T", format, arg)
			require.NotContains(t, got, rawText, "%s of %T", format, arg)
		}
	}
	require.Equal(t, `curve.Certificate{public-key: "`+serverPublic+`", secret-key: REDACTED}`, c.String())
	require.Equal(t, c.String(), fmt.Sprintf("%#v", c))
	require.Equal(t, "<nil>", fmt.Sprintf("%v", (*Certificate)(nil)))
	require.Contains(t, string(File(c)), serverSecret, "File is the way to get the key out")

	var zero Certificate
	require.Contains(t, zero.String(), "secret-key: REDACTED")
	_, err = Parse(File(&zero))
	require.Error(t, err, "the zero Certificate has no keypair")
	require.True(t, (*Certificate)(nil).Equal(nil))
	require.False(t, c.Equal(nil))
}

// FuzzZ85 checks that decoding undoes encoding, and encoding undoes decoding, for any input.
func FuzzZ85(f *testing.F) {
	f.Add([]byte("HelloWorld"))
	f.Add([]byte(serverSecret))
	f.Add([]byte{0x86, 0x4F, 0xD2, 0x6F})
	f.Fuzz(func(t *testing.T, data []byte) {
		raw := data[:len(data)/4*4]
		text, err := EncodeZ85(raw)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeZ85(text)
		if err != nil || !bytes.Equal(back, raw) {
			t.Fatalf("DecodeZ85(EncodeZ85(%x)) = %x, %v", raw, back, err)
		}
		decoded, err := DecodeZ85(string(data))
		if err != nil {
			return
		}
		again, err := EncodeZ85(decoded)
		if err != nil || again != string(data) {
			t.Fatalf("EncodeZ85(DecodeZ85(%q)) = %q, %v", data, again, err)
		}
	})
}

// FuzzParse checks that Parse never panics, that a certificate it accepts survives File and
// Parse unchanged, and that its errors never quote the secret key line.
func FuzzParse(f *testing.F) {
	f.Add([]byte(keygenFile))
	f.Add([]byte("curve\n    public-key = \"" + clientPublic + "\"\n    secret-key = \"" + clientSecret + "\"\n"))
	f.Add([]byte("metadata\n    a = \"\"\ncurve\n"))
	gen, err := Generate(fixedEntropy(), Metadata{Key: "name", Value: "x"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(File(gen))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			var parseErr *ParseError
			if !errors.As(err, &parseErr) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		file := File(c)
		back, err := Parse(file)
		if err != nil {
			t.Fatalf("Parse(File(c)): %v\n%s", err, file)
		}
		if !c.Equal(back) {
			t.Fatalf("Parse(File(c)) != c")
		}
		if !bytes.Equal(File(back), file) {
			t.Fatalf("File is not stable")
		}
	})
}
