// Command kfake runs franz-go's kfake cluster (github.com/twmb/franz-go/pkg/kfake) for kconform's
// kfake target (conformance/targets/kfake.py), which builds it into its cache and drives it.
//
// Contract with the target:
//
//	argv    kfake -brokers N [-ports P0,P1,...] [-data-dir DIR] [-auto-create-topics]
//	        [-default-partitions N] [-c key=value ...] [-log-level warn]
//	stdout  one line `listening 127.0.0.1:PORT` per broker, in node order; one line
//	        `unsupported KEY` per -c key that kfake does not know (it keeps and echoes any key,
//	        but acts only on the broker configs it lists in DescribeConfigs); then `ready`;
//	        nothing after that
//	stderr  kfake's log and any panic (the target appends it to the node log)
//	SIGTERM clean shutdown: kfake persists its state to -data-dir, then the process exits 0
//
// A restart repeats the argv with -ports naming the ports the first start printed, so every
// broker keeps its node id (kfake numbers brokers by position) and its address.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type configFlag map[string]string

func (f configFlag) String() string { return "" }

func (f configFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("expected key=value, got %q", s)
	}
	f[k] = v
	return nil
}

var logLevels = map[string]kfake.LogLevel{
	"none": kfake.LogLevelNone, "error": kfake.LogLevelError, "warn": kfake.LogLevelWarn,
	"info": kfake.LogLevelInfo, "debug": kfake.LogLevelDebug,
}

func main() {
	brokers := flag.Int("brokers", 1, "number of brokers")
	ports := flag.String("ports", "", "comma-separated ports, one per broker (default: ephemeral)")
	dataDir := flag.String("data-dir", "", "directory kfake persists its state to (needed for a restart)")
	autoCreate := flag.Bool("auto-create-topics", false, "Metadata may create topics (auto.create.topics.enable)")
	partitions := flag.Int("default-partitions", 1, "partitions of an auto-created topic (num.partitions)")
	logLevel := flag.String("log-level", "warn", "none, error, warn, info or debug")
	configs := configFlag{}
	flag.Var(configs, "c", "broker config key=value (repeatable)")
	flag.Parse()

	level, ok := logLevels[*logLevel]
	if !ok {
		fail(fmt.Errorf("unknown log level %q", *logLevel))
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(*brokers),
		kfake.DefaultNumPartitions(*partitions),
		kfake.WithLogger(kfake.BasicLogger(os.Stderr, level)),
	}
	if *ports != "" {
		var ps []int
		for _, p := range strings.Split(*ports, ",") {
			n, err := strconv.Atoi(p)
			if err != nil {
				fail(fmt.Errorf("bad port %q: %w", p, err))
			}
			ps = append(ps, n)
		}
		opts = append(opts, kfake.Ports(ps...))
	}
	if *dataDir != "" {
		opts = append(opts, kfake.DataDir(*dataDir))
	}
	if *autoCreate {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	if len(configs) > 0 {
		opts = append(opts, kfake.BrokerConfigs(configs))
	}

	var unknown []string
	if len(configs) > 0 {
		known, err := knownBrokerConfigs()
		if err != nil {
			fail(fmt.Errorf("asking kfake which broker configs it knows: %w", err))
		}
		for k := range configs {
			if !known[k] {
				unknown = append(unknown, k)
			}
		}
		sort.Strings(unknown)
	}

	// Subscribe before announcing: a SIGTERM right after `ready` must reach Close.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)

	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fail(err)
	}
	for _, addr := range c.ListenAddrs() {
		fmt.Printf("listening %s\n", addr)
	}
	for _, k := range unknown {
		fmt.Printf("unsupported %s\n", k)
	}
	fmt.Println("ready")

	<-sigs
	c.Close()
}

// knownBrokerConfigs asks a throw-away one-broker kfake, started with no broker configs, for its
// broker configs over the wire (DescribeConfigs): the names it lists are the ones it knows.
func knownBrokerConfigs() (map[string]bool, error) {
	probe, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, err
	}
	defer probe.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(probe.ListenAddrs()...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeBroker
	res.ResourceName = "0"
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, r := range resp.Resources {
		for _, c := range r.Configs {
			known[c.Name] = true
		}
	}
	return known, nil
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "kfake: %v\n", err)
	os.Exit(2)
}
