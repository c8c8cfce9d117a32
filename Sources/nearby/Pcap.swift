import DNSWire

/// One UDP datagram read from a capture file.
struct CapturedDatagram {
    var time: Double
    var source: String
    var destination: String
    var payload: [UInt8]
}

enum PcapError: Error, CustomStringConvertible {
    case notPcap
    case unsupportedLinkType(Int)
    case truncated

    var description: String {
        switch self {
        case .notPcap: "not a pcap capture (no pcap magic number)"
        case .unsupportedLinkType(let type):
            "pcap link type \(type) is not supported (Ethernet, Linux cooked and raw IP are)"
        case .truncated: "the pcap header is cut short"
        }
    }
}

/// Reads classic pcap files (as `tcpdump -w` writes them) and returns their UDP datagrams.
/// Frames that are not UDP over IPv4/IPv6, or are cut short, are passed over.
enum Pcap {
    static func isPcap(_ data: [UInt8]) -> Bool {
        data.count >= 4 && magic(data) != nil
    }

    private static func magic(_ data: [UInt8]) -> (littleEndian: Bool, nanoseconds: Bool)? {
        switch (data[0], data[1], data[2], data[3]) {
        case (0xD4, 0xC3, 0xB2, 0xA1): (true, false)
        case (0x4D, 0x3C, 0xB2, 0xA1): (true, true)
        case (0xA1, 0xB2, 0xC3, 0xD4): (false, false)
        case (0xA1, 0xB2, 0x3C, 0x4D): (false, true)
        default: nil
        }
    }

    static func datagrams(in data: [UInt8]) throws -> [CapturedDatagram] {
        guard data.count >= 4, let (little, nano) = magic(data) else { throw PcapError.notPcap }
        guard data.count >= 24 else { throw PcapError.truncated }
        func u32(_ offset: Int) -> Int {
            let b = data[offset..<(offset + 4)].map(Int.init)
            return little ? b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24 : b[3] | b[2] << 8 | b[1] << 16 | b[0] << 24
        }
        let linkType = u32(20)
        var result: [CapturedDatagram] = []
        var offset = 24
        var firstTime: Double?
        while offset + 16 <= data.count {
            let seconds = Double(u32(offset))
            let fraction = Double(u32(offset + 4)) / (nano ? 1e9 : 1e6)
            let captured = u32(offset + 8)
            let start = offset + 16
            offset = start + captured
            guard offset <= data.count else { break }
            let time = seconds + fraction
            if firstTime == nil { firstTime = time }
            let frame = data[start..<offset]
            let ipStart: Int
            switch linkType {
            case 1:  // Ethernet
                guard frame.count >= 14 else { continue }
                ipStart = start + 14
            case 101:  // raw IP
                ipStart = start
            case 113:  // Linux cooked v1
                guard frame.count >= 16 else { continue }
                ipStart = start + 16
            default:
                throw PcapError.unsupportedLinkType(linkType)
            }
            guard let datagram = udp(in: data, from: ipStart, to: offset) else { continue }
            result.append(
                CapturedDatagram(
                    time: time - (firstTime ?? time), source: datagram.source,
                    destination: datagram.destination, payload: datagram.payload))
        }
        return result
    }

    private static func udp(in data: [UInt8], from start: Int, to end: Int)
        -> (source: String, destination: String, payload: [UInt8])?
    {
        guard start < end else { return nil }
        let version = data[start] >> 4
        let udpStart: Int
        let source: String
        let destination: String
        if version == 4 {
            let headerLength = Int(data[start] & 0x0F) * 4
            guard headerLength >= 20, start + headerLength <= end, data[start + 9] == 17 else { return nil }
            source = data[(start + 12)..<(start + 16)].map(String.init).joined(separator: ".")
            destination = data[(start + 16)..<(start + 20)].map(String.init).joined(separator: ".")
            udpStart = start + headerLength
        } else if version == 6 {
            guard start + 40 <= end, data[start + 6] == 17 else { return nil }
            source = ipv6Text(data[(start + 8)..<(start + 24)])
            destination = ipv6Text(data[(start + 24)..<(start + 40)])
            udpStart = start + 40
        } else {
            return nil
        }
        guard udpStart + 8 <= end else { return nil }
        let sourcePort = Int(data[udpStart]) << 8 | Int(data[udpStart + 1])
        let destinationPort = Int(data[udpStart + 2]) << 8 | Int(data[udpStart + 3])
        let length = Int(data[udpStart + 4]) << 8 | Int(data[udpStart + 5])
        guard length >= 8, udpStart + length <= end else { return nil }
        let bracket = version == 6
        func endpoint(_ address: String, _ port: Int) -> String {
            bracket ? "[\(address)]:\(port)" : "\(address):\(port)"
        }
        return (
            endpoint(source, sourcePort), endpoint(destination, destinationPort),
            Array(data[(udpStart + 8)..<(udpStart + length)])
        )
    }

    private static func ipv6Text(_ bytes: ArraySlice<UInt8>) -> String {
        IPv6Address(bytes: bytes)?.description ?? "?"
    }
}
