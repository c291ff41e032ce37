.PHONY: test lint run build
# Every build carries -tags goolm: the Matrix courier's end-to-end
# encryption with mautrix's pure-Go olm (no cgo, no libolm).
build:
	CGO_ENABLED=0 go build -tags goolm -o acrelay ./cmd/acrelay
test:
	./scripts/test.sh
lint:
	./scripts/lint.sh
run:
	CGO_ENABLED=0 go run -tags goolm ./cmd/acrelay serve
