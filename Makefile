.PHONY: test lint run
test:
	./scripts/test.sh
lint:
	test -z "$$(gofmt -l .)"
	go vet ./...
run:
	go run ./cmd/acrelay serve
