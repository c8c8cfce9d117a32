// Measures PeerConnection's hand-written JSON codec (JSONTextCodec, behind JSONValue and
// JSONRPCFrame) against Foundation's JSONSerialization and JSONDecoder/JSONEncoder of this
// toolchain, on the channel's own messages, in one run. Prints one line per message and
// operation: operations per second for each, and ours over theirs (above 1: ours is faster).
//
//   nearby-json-bench [ROUNDS]        (default 5 rounds of 0.2 s per figure; the median is shown)
//
// Decoding is compared to a tree (ours: JSONValue; JSONSerialization: its own Any tree, which
// it is cheapest at; JSONDecoder: JSONValue through Codable). Encoding writes compact text with
// sorted keys, as the channel does. "typed params" decodes an `initialize` request's params to
// a Codable struct with `JSONValue.decode(as:)` (a Decoder that reads the tree itself) against
// JSONDecoder from the params' text.

import Foundation
import PeerConnection

let rounds = CommandLine.arguments.count > 1 ? max(1, Int(CommandLine.arguments[1]) ?? 5) : 5

let pad = String(repeating: "x", count: 960)
let samples: [(name: String, text: String)] = [
    ("ping request", #"{"jsonrpc":"2.0","id":7,"method":"ping"}"#),
    ("ping answer", #"{"jsonrpc":"2.0","id":7,"result":{}}"#),
    (
        "initialize",
        #"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_version":"0.2.2","client_capabilities":{"streams":true},"client_info":{"name":"nearby","title":"Nearby","version":"0.2.0"},"_meta":{"display_name":"Laptop","peer_id":"9R4X9V-44R7N6-QW8CKD-J1Z2E3-RTY5UZ-M0PXAB"}}}"#
    ),
    ("echo with params", #"{"jsonrpc":"2.0","id":12,"method":"echo","params":{"text":"héllo","n":[1,2,3],"ok":true,"pi":3.14159}}"#),
    ("1 KiB notification", #"{"jsonrpc":"2.0","method":"flood","params":{"i":123456,"pad":"\#(pad)"}}"#),
    ("batch of 10 pings", "[" + (1...10).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"ping"}"# }.joined(separator: ",") + "]"),
]

struct ClientInfo: Codable { var name: String; var title: String; var version: String }
struct InitializeParams: Codable {
    var protocol_version: String
    var client_capabilities: [String: Bool]
    var client_info: ClientInfo
    var _meta: [String: String]
}

/// Runs `body` repeatedly for `seconds`, `rounds` times; the median rate (operations per second).
func rate(_ body: () throws -> Void) rethrows -> Double {
    var rates: [Double] = []
    for _ in 0..<rounds {
        let clock = ContinuousClock()
        let start = clock.now
        var count = 0
        while clock.now - start < .milliseconds(200) {
            for _ in 0..<50 { try body() }
            count += 50
        }
        let elapsed = clock.now - start
        rates.append(Double(count) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18))
    }
    return rates.sorted()[rates.count / 2]
}

func show(_ what: String, ours: Double, _ others: [(String, Double)]) {
    let columns = others.map { $0.0 + String(format: " %9.0f/s (ours %5.2fx)", $0.1, ours / $0.1) }.joined(separator: "   ")
    print(what.padding(toLength: 16, withPad: " ", startingAt: 0) + String(format: "ours %9.0f/s   ", ours) + columns)
}

print("JSON codec: PeerConnection's own vs Foundation (JSONSerialization, JSONDecoder/JSONEncoder), \(rounds) rounds, median")
var sink = 0
for sample in samples {
    let data = Data(sample.text.utf8)
    let value = try JSONValue(parsing: sample.text)
    let tree = try JSONSerialization.jsonObject(with: data)
    let sorted = JSONEncoder()
    sorted.outputFormatting = .sortedKeys
    print("\(sample.name) (\(data.count) bytes)")
    let frameOurs = rate { sink &+= JSONRPCFrame(parsing: sample.text).entries.count }
    let decodeSerialization = try rate { sink &+= (try JSONSerialization.jsonObject(with: Data(sample.text.utf8)) as AnyObject) === NSNull() ? 1 : 0 }
    let decodeDecoder = try rate { sink &+= try JSONDecoder().decode(JSONValue.self, from: Data(sample.text.utf8)) == .null ? 1 : 0 }
    let parseOurs = try rate { sink &+= try JSONValue(parsing: sample.text) == .null ? 1 : 0 }
    show("  decode", ours: parseOurs, [("JSONSerialization", decodeSerialization), ("JSONDecoder", decodeDecoder)])
    show("  decode frame", ours: frameOurs, [("JSONSerialization", decodeSerialization)])
    let encodeOurs = rate { sink &+= value.jsonText.utf8.count }
    let encodeSerialization = try rate { sink &+= try JSONSerialization.data(withJSONObject: tree, options: [.sortedKeys]).count }
    let encodeEncoder = try rate { sink &+= try sorted.encode(value).count }
    show("  encode", ours: encodeOurs, [("JSONSerialization", encodeSerialization), ("JSONEncoder", encodeEncoder)])
}
let initialize = try JSONValue(parsing: samples[2].text)
guard let params = initialize["params"] else { fatalError("the initialize sample has no params") }
let paramsText = Data(params.jsonText.utf8)
let throughValue = try rate { sink &+= try params.decode(as: InitializeParams.self).protocol_version.count }
let straight = try rate { sink &+= try JSONDecoder().decode(InitializeParams.self, from: paramsText).protocol_version.count }
print("typed params (initialize)")
show("  decode", ours: throughValue, [("JSONDecoder from text", straight)])
if sink == 42 { print("") }  // keeps the work from being optimised away
