module github.com/polygateway/polygateway

go 1.26.0

require (
	github.com/joho/godotenv v1.5.1
	github.com/kaptinlin/jsonrepair v0.2.15
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	go.uber.org/goleak v1.3.0
)

require (
	github.com/go-json-experiment/json v0.0.0-20251027170946-4849db3c2f7e // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	golang.org/x/text v0.41.0 // indirect
)
