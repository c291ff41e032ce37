package validate

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

var commentLine = regexp.MustCompile(`(?m)^\s*#.*$`)

// stripComments drops whole-line comments, to tell an empty document
// (comments only) from one to decode.
func stripComments(b []byte) []byte { return commentLine.ReplaceAll(b, nil) }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func metav1LabelSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return nil, fmt.Errorf("no label selector")
	}
	return metav1.LabelSelectorAsSelector(s)
}
