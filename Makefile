.PHONY: test lint run
test:
	./scripts/test.sh
lint:
	./scripts/lint.sh
run:
	go run ./cmd/acrelay serve
