package client

import (
	"reflect"
	"testing"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/wire"
)

func TestParseAPIError(t *testing.T) {
	tests := []struct {
		name string
		code int
		body string
		want APIError
		text string
	}{
		{
			name: "event issues",
			code: 400,
			body: `{"error":"event_invalid","message":"the event is invalid","issues":[{"pointer":"/kind","code":"required","message":"kind is required"}]}`,
			want: APIError{Status: 400, Code: wire.CodeEventInvalid, Message: "the event is invalid",
				Issues: []correspondence.Issue{{Pointer: "/kind", Code: "required", Message: "kind is required"}}},
			text: "relay answered 400 event_invalid: the event is invalid\n  /kind required: kind is required",
		},
		{
			name: "contract issues have no code",
			code: 422,
			body: `{"error":"contract_invalid","message":"the contract violates the handoff contract schema","issues":[{"pointer":"/state","message":"bad"}]}`,
			want: APIError{Status: 422, Code: wire.CodeContractInvalid, Message: "the contract violates the handoff contract schema",
				Issues: []correspondence.Issue{{Pointer: "/state", Message: "bad"}}},
			text: "relay answered 422 contract_invalid: the contract violates the handoff contract schema\n  /state: bad",
		},
		{
			name: "hint",
			code: 412,
			body: `{"error":"precondition_failed","message":"m","hint":"h"}`,
			want: APIError{Status: 412, Code: wire.CodePreconditionFailed, Message: "m", Hint: "h"},
			text: "relay answered 412 precondition_failed: m (hint: h)",
		},
		{
			name: "not an error body",
			code: 502,
			body: `<html>bad gateway</html>`,
			want: APIError{Status: 502, Code: "http_502", Message: "Bad Gateway"},
			text: "relay answered 502 http_502: Bad Gateway",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseAPIError(tc.code, []byte(tc.body))
			if !reflect.DeepEqual(*got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", *got, tc.want)
			}
			if got.Error() != tc.text {
				t.Fatalf("text %q\nwant %q", got.Error(), tc.text)
			}
		})
	}
}
