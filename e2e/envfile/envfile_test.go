package envfile

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	got, err := Parse("# a comment\nA=1\n\n  B=two words  \n", "A", "B", "C")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"A": "1", "B": "two words"}, got)

	_, err = Parse("A 1\n", "A")
	require.ErrorContains(t, err, `line "A 1" is not KEY=VALUE`)
	_, err = Parse("D=4\n", "A")
	require.ErrorContains(t, err, `unknown key "D"`)
}
