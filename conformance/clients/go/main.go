// Command kconform-go-driver runs one of kconform's Go client drivers over the JSON-lines driver
// protocol (conformance/clients/protocol.py): `kconform-go-driver franz-go --ops=a,b,...` or
// `kconform-go-driver sarama --ops=...`. Both drivers live in one binary so that one cached build
// (conformance/buildcache.go) serves both; `kconform-go-driver errors` prints the shared Kafka
// error table as JSON for the test that compares it with Kafka's.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"kconform/clients/go/internal/driver"
	"kconform/clients/go/internal/franzgo"
	"kconform/clients/go/internal/saramadrv"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kconform-go-driver franz-go|sarama|errors|versions [--ops=a,b,...]")
		os.Exit(2)
	}
	for _, arg := range os.Args[2:] {
		if list, ok := strings.CutPrefix(arg, "--ops="); ok {
			driver.SetOpNames(list)
		}
	}
	switch os.Args[1] {
	case "franz-go":
		driver.Main(franzgo.New())
	case "sarama":
		driver.Main(saramadrv.New())
	case "errors":
		_ = json.NewEncoder(os.Stdout).Encode(driver.ErrorTable())
	case "versions":
		_ = json.NewEncoder(os.Stdout).Encode(map[string]string{"franz-go": franzgo.Version(), "sarama": saramadrv.Version()})
	default:
		fmt.Fprintf(os.Stderr, "unknown driver %q\n", os.Args[1])
		os.Exit(2)
	}
}
