// libFuzzer target for the capture reader of `nearby decode` (Sources/nearby/Pcap.swift).
// Tools/fuzz-build compiles this file into the SAME module as Pcap.swift (module `nearby`, as
// in the package), so it may use internal API; DNSWire, which Pcap.swift imports, is built as a
// module of its own beside it, exactly as Package.swift has it.
//
// Every failed property calls `fail`, which traps with a message naming the property; libFuzzer
// then saves the input under .build-fuzz/crashes-pcap/.
//
//  C1 Reading any bytes as a capture never traps: Pcap.isPcap(input) and
//     Pcap.datagrams(in: input) either return or throw a PcapError; datagrams(in:) throws
//     .notPcap exactly when isPcap is false and .truncated only for a pcap magic number
//     followed by less than a full 24-byte file header.
//  C2 What it returns lies within the input: the payloads occur in the input in the order
//     returned and without overlapping (each after the 24-byte file header, a 16-byte record
//     header, a 20-byte IP header and an 8-byte UDP header at least); a datagram's time is
//     finite; its endpoints read "a.b.c.d:port" or "[IPv6]:port" with a port 0...65535 and an
//     address that DNSWire's IPv4Address/IPv6Address parse back to the same text.
//  C3 A well-formed capture gives its payload back: the harness writes a pcap file header and
//     one record holding the input as the payload of a UDP datagram in IPv4 or IPv6, in an
//     Ethernet, Linux cooked or raw IP frame (byte order, time resolution, link type, IP
//     version, IPv4 options, trailing frame padding and addresses all chosen from the input),
//     followed by a second record whose frame is the raw input. The first datagram read back is
//     exactly the input, from and to the endpoints written, at time 0; at most one more follows.

import DNSWire
import NearbyBasics

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: count == 0 ? nil : start, count: count)
    FuzzPcap(bytes: Array(input)).run()
    return 0
}

struct FuzzPcap {
    let bytes: [UInt8]

    func run() {
        let datagrams = readAny()               // C1
        checkWithinInput(datagrams, of: bytes)  // C2
        checkWellFormed()                       // C3
    }

    // MARK: C1

    func readAny() -> [CapturedDatagram] {
        let isPcap = Pcap.isPcap(bytes)
        do {
            let datagrams = try Pcap.datagrams(in: bytes)
            guard isPcap else { fail("C1", "isPcap is false but datagrams(in:) read \(datagrams.count) datagrams") }
            guard bytes.count >= 24 else { fail("C1", "a \(bytes.count)-byte capture (no full file header) was read") }
            return datagrams
        } catch let error as PcapError {
            switch error {
            case .notPcap:
                guard !isPcap else { fail("C1", "isPcap is true but datagrams(in:) threw notPcap") }
            case .truncated:
                guard isPcap, bytes.count < 24 else { fail("C1", "threw truncated for a \(bytes.count)-byte input (isPcap \(isPcap))") }
            case .unsupportedLinkType:
                guard isPcap, bytes.count >= 24 else { fail("C1", "threw \(error) for a \(bytes.count)-byte input (isPcap \(isPcap))") }
            }
            _ = error.description
            return []
        } catch {
            fail("C1", "datagrams(in:) threw \(error), not a PcapError")
        }
    }

    // MARK: C2

    func checkWithinInput(_ datagrams: [CapturedDatagram], of data: [UInt8]) {
        // Before a payload: the file header (24 bytes, once), a record header (16) and at least
        // a 20-byte IPv4 header and the 8-byte UDP header. Leftmost matching in order finds a
        // placement whenever one exists.
        let headers = 24 + 16 + 20 + 8
        var from = headers
        for (index, datagram) in datagrams.enumerated() {
            let payload = datagram.payload
            guard payload.count <= data.count - headers else {
                fail("C2", "datagram \(index) has \(payload.count) bytes, more than the \(data.count)-byte capture can hold")
            }
            guard let found = firstOccurrence(of: payload, in: data, from: from) else {
                fail("C2", "datagram \(index) (\(payload.count) bytes) is not in the input after offset \(from)")
            }
            from = found + payload.count + 16 + 20 + 8
            guard datagram.time.isFinite else { fail("C2", "datagram \(index) has time \(datagram.time)") }
            checkEndpoint(datagram.source, "datagram \(index) source")
            checkEndpoint(datagram.destination, "datagram \(index) destination")
        }
    }

    func firstOccurrence(of needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard start >= 0, start + needle.count <= haystack.count else { return nil }
        guard let head = needle.first else { return start }
        var position = start
        let last = haystack.count - needle.count
        search: while position <= last {
            if haystack[position] == head {
                for offset in 1..<needle.count where haystack[position + offset] != needle[offset] {
                    position += 1
                    continue search
                }
                return position
            }
            position += 1
        }
        return nil
    }

    func checkEndpoint(_ text: String, _ what: String) {
        let address: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.lastIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                fail("C2", "\(what) \(text) is not [IPv6]:port")
            }
            address = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
            guard let parsed = IPv6Address(String(address)), parsed.description == address else {
                fail("C2", "\(what) \(text): IPv6Address does not read \(address) back to the same text")
            }
        } else {
            guard let colon = text.lastIndex(of: ":") else { fail("C2", "\(what) \(text) has no port") }
            address = text[..<colon]
            portText = text[text.index(after: colon)...]
            guard let parsed = IPv4Address(String(address)), parsed.description == address else {
                fail("C2", "\(what) \(text): IPv4Address does not read \(address) back to the same text")
            }
        }
        guard let port = Int(portText), (0...65535).contains(port), String(port) == portText else {
            fail("C2", "\(what) \(text) has port \(portText)")
        }
    }

    // MARK: C3

    enum Link: CaseIterable { case ethernet, cooked, raw }

    func checkWellFormed() {
        guard bytes.count <= 65535 - 8 - 60 else { return }  // one UDP datagram in one IP packet
        // Choices from a cheap mix of the input, so that every input tries one combination.
        var mix = UInt64(truncatingIfNeeded: bytes.count) &* 0x9E37_79B9_7F4A_7C15
        for byte in bytes.prefix(64) { mix = (mix ^ UInt64(byte)) &* 0x100_0000_01B3 }
        func take(_ choices: Int) -> Int {
            let choice = Int(mix % UInt64(choices))
            mix /= UInt64(choices)
            return choice
        }
        let little = take(2) == 0
        let nano = take(2) == 0
        let link = Link.allCases[take(3)]
        let version6 = take(2) == 0
        let optionWords = take(11)  // IPv4 header of 5...15 words
        let padding = take(5)       // bytes after the IP packet (Ethernet padding, a trailer)
        let sourcePort = take(65536)
        let destinationPort = take(65536)

        let seed = Array(bytes.prefix(32)) + Array(repeating: UInt8(0x5A), count: 32)
        let shift = Int(mix % 7)
        let addressSeed = Array(seed[shift...] + seed[..<shift])
        let source = Array(addressSeed.prefix(version6 ? 16 : 4))
        let destination = Array(addressSeed.suffix(version6 ? 16 : 4))

        let udpLength = 8 + bytes.count
        var udp = be16(sourcePort) + be16(destinationPort) + be16(udpLength) + be16(0)
        udp += bytes
        var ip: [UInt8]
        if version6 {
            ip = [0x60, 0, 0, 0] + be16(udpLength) + [17, 255] + source + destination
        } else {
            let headerLength = (5 + optionWords) * 4
            ip = [UInt8(0x40 | (5 + optionWords)), 0] + be16(headerLength + udpLength) + [0, 0, 0x40, 0, 255, 17, 0, 0]
            ip += source + destination
            ip += Array(repeating: 1, count: optionWords * 4)  // NOP options
        }
        ip += udp
        ip += Array(repeating: 0, count: padding)
        var frame: [UInt8]
        let linkType: Int
        switch link {
        case .ethernet:
            linkType = 1
            frame = [1, 0, 0x5E, 0, 0, 0xFB, 2, 0, 0, 0, 0, 1] + (version6 ? [0x86, 0xDD] : [0x08, 0x00])
        case .cooked:
            linkType = 113
            frame = [0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0] + (version6 ? [0x86, 0xDD] : [0x08, 0x00])
        case .raw:
            linkType = 101
            frame = []
        }
        frame += ip

        func u32(_ value: Int) -> [UInt8] {
            let big = [UInt8(value >> 24 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
            return little ? big.reversed() : big
        }
        func u16(_ value: Int) -> [UInt8] {
            let big = [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
            return little ? big.reversed() : big
        }
        let magic = nano ? 0xA1B2_3C4D : 0xA1B2_C3D4
        var capture = u32(magic) + u16(2) + u16(4) + u32(0) + u32(0) + u32(262_144) + u32(linkType)
        let fraction = nano ? 999_999_999 : 999_999
        capture += u32(1_700_000_000) + u32(fraction) + u32(frame.count) + u32(frame.count) + frame
        capture += u32(1_700_000_001) + u32(0) + u32(bytes.count) + u32(bytes.count) + bytes

        let datagrams: [CapturedDatagram]
        do {
            datagrams = try Pcap.datagrams(in: capture)
        } catch {
            fail("C3", "a well-formed capture (\(link), IPv\(version6 ? 6 : 4)) threw \(error)\ncapture: \(hexString(capture))")
        }
        guard (1...2).contains(datagrams.count) else {
            fail("C3", "a capture of two records (\(link), IPv\(version6 ? 6 : 4)) gave \(datagrams.count) datagrams")
        }
        let first = datagrams[0]
        guard first.payload == bytes else {
            fail("C3", "the payload came back as \(first.payload.count) bytes \(hexString(first.payload)) (\(link), IPv\(version6 ? 6 : 4))")
        }
        let expectedSource: String
        let expectedDestination: String
        if version6 {
            guard let from = IPv6Address(bytes: source), let to = IPv6Address(bytes: destination) else {
                fail("C3", "IPv6Address(bytes:) refused 16 bytes")
            }
            expectedSource = "[\(from)]:\(sourcePort)"
            expectedDestination = "[\(to)]:\(destinationPort)"
        } else {
            expectedSource = source.map(String.init).joined(separator: ".") + ":\(sourcePort)"
            expectedDestination = destination.map(String.init).joined(separator: ".") + ":\(destinationPort)"
        }
        guard first.source == expectedSource, first.destination == expectedDestination, first.time == 0 else {
            fail(
                "C3",
                "datagram read as \(first.source) -> \(first.destination) at \(first.time), "
                    + "written as \(expectedSource) -> \(expectedDestination) at 0")
        }
        checkWithinInput(datagrams, of: capture)
    }

    func be16(_ value: Int) -> [UInt8] { [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }

    // MARK: reporting

    func fail(_ property: String, _ detail: String) -> Never {
        fuzzFailure("pcap", property, detail, input: bytes)
    }
}
