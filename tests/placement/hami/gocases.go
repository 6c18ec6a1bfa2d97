//go:build ignore

// The expected values of tests/placement/hami/test_gosemantics.py and test_gojson.py, printed by Go itself:
// strconv (Quote, ParseInt, Atoi, ParseBool), int32 conversion and integer division, float32 rounding,
// sort.Sort's order of equal elements, and encoding/json's syntax errors and string encoding.
//
//	go run tests/placement/hami/gocases.go
package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

type keyed struct{ key, idx []int }

func (k keyed) Len() int           { return len(k.key) }
func (k keyed) Less(i, j int) bool { return k.key[i] < k.key[j] }
func (k keyed) Swap(i, j int) {
	k.key[i], k.key[j] = k.key[j], k.key[i]
	k.idx[i], k.idx[j] = k.idx[j], k.idx[i]
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func main() {
	fmt.Println("# strconv.Quote")
	for _, s := range []string{"abc", `a"b`, "a\\b", "a\nb", "\x00", "\x7f", "é", "日本", "\u00a0", "\u2028", "tab\there", "\U0001F600", "\U000E0001"} {
		fmt.Printf("(%s, %s),\n", strconv.Quote(s), strconv.Quote(strconv.Quote(s)))
	}
	fmt.Println("# strconv.ParseInt(s, 10, bits)")
	for _, bits := range []int{64, 32} {
		for _, s := range []string{"42", "+7", "-0", "007", "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "2147483647", "2147483648", "-2147483649", "1.5", "", "0x10", "1_000", " 1", "+", "-", "１"} {
			v, err := strconv.ParseInt(s, 10, bits)
			fmt.Printf("(%s, %d, %d, %s),\n", strconv.Quote(s), bits, v, strconv.Quote(errText(err)))
		}
	}
	fmt.Println("# strconv.Atoi")
	for _, s := range []string{"12", "x", "99999999999999999999"} {
		v, err := strconv.Atoi(s)
		fmt.Printf("(%s, %d, %s),\n", strconv.Quote(s), v, strconv.Quote(errText(err)))
	}
	fmt.Println("# strconv.ParseBool")
	for _, s := range []string{"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False", "tRuE", "yes", "", " true"} {
		v, err := strconv.ParseBool(s)
		fmt.Printf("(%s, %v, %s),\n", strconv.Quote(s), v, strconv.Quote(errText(err)))
	}
	fmt.Println("# int32(x)")
	for _, x := range []int64{0, 2147483647, 2147483648, 4294967296 + 5, -1, -2147483649, 1 << 40, -(1 << 62)} {
		fmt.Printf("(%d, %d),\n", x, int32(x))
	}
	fmt.Println("# a / b")
	for _, p := range [][2]int64{{7, 2}, {-7, 2}, {7, -2}, {-7, -2}, {0, 5}, {-1, 100}, {199, 100}, {-199, 100}} {
		fmt.Printf("(%d, %d, %d),\n", p[0], p[1], p[0]/p[1])
	}
	fmt.Println("# int32(int32(devmem*pct) / 100)")
	for _, p := range [][2]int32{{8192, 50}, {40960, 33}, {81920, 100}, {30000000, 100}, {100000000, 50}} {
		m := p[0] * p[1]
		fmt.Printf("(%d, %d, %d),\n", p[0], p[1], m/100)
	}
	fmt.Println("# float64(float32(x))")
	for _, x := range []float64{0.1, 1.0 / 3.0, 16777217, 0.5, 2.0 / 3.0, 123456.789} {
		fmt.Printf("(%v, %v),\n", x, float64(float32(x)))
	}
	fmt.Println("# sort.Sort: keys, then the original positions in sorted order")
	for _, c := range [][2]int{{12, 3}, {13, 3}, {20, 5}, {50, 4}, {64, 2}, {100, 7}, {200, 3}} {
		n, m := c[0], c[1]
		k := keyed{make([]int, n), make([]int, n)}
		for i := 0; i < n; i++ {
			k.key[i] = (i*7919 + i*i*31) % m
			k.idx[i] = i
		}
		keys := append([]int(nil), k.key...)
		sort.Sort(k)
		fmt.Printf("(%d, %d, %v, %v),\n", n, m, keys, k.idx)
	}
	fmt.Println("# json.Unmarshal syntax errors")
	for _, s := range []string{"[]", "null", " 1 ", "\"x\"", "[1e5,-0,0.5]", "{\"a\":[true,false,null]}", "", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "[1 2]", "01", "tru", "trux", "nul", "\"\x01\"", "1.", "1.a", "-", "-a", "1e", "1ea", "\"\\q\"", "[1] x", "{1:2}", "[", "{", "\"abc", "[NaN]", "'a'", "\"\\u12\"", "\"\\u12x4\""} {
		var v any
		err := json.Unmarshal([]byte(s), &v)
		fmt.Printf("(%s, %s),\n", strconv.Quote(s), strconv.Quote(errText(err)))
	}
	fmt.Println("# json.Marshal(string)")
	for _, s := range []string{"abc", "<a&b>", "\u2028\u2029", "é", "\x01\x1f", "tab\t", "q\"", "\\", "\b\f\n\r", "\x7f"} {
		b, _ := json.Marshal(s)
		fmt.Printf("(%s, %s),\n", strconv.Quote(s), strconv.Quote(string(b)))
	}
}
