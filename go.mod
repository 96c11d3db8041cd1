module github.com/polygateway/polygateway

go 1.25

require (
	github.com/joho/godotenv v1.5.1
	go.uber.org/goleak v1.3.0
)
