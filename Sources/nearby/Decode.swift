import ArgumentParser
import DNSWire
import Foundation

/// `nearby decode`: shows DNS/mDNS packets from tcpdump captures or raw message files.
struct Decode: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decode mDNS packets from pcap captures or raw DNS message files.",
        discussion: """
            Each FILE is either a pcap capture (as `tcpdump -w` writes it; every UDP datagram \
            in it is decoded) or one raw DNS message. Names are shown in presentation format \
            with the escapes dns-sd uses (\\032 is a space). A packet that does not decode is \
            reported with the reason and the offset, and the exit status becomes 1.

            Examples:
              tcpdump -i eth0 -w mdns.pcap udp port 5353     (then)  nearby decode mdns.pcap
              nearby decode --json Tests/DNSWireTests/Fixtures/golden/avahi-probe-1.bin
            """
    )

    @Argument(help: "pcap captures or raw DNS messages", completion: .file())
    var files: [String]

    @Flag(help: "Print one JSON object per packet.")
    var json = false

    func validate() throws {
        guard !files.isEmpty else { throw ValidationError("name at least one FILE (a pcap capture or a raw DNS message)") }
    }

    func run() throws {
        var number = 0
        var failures = 0
        for path in files {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ValidationError("cannot read \(path): no such file or not readable")
            }
            let bytes = [UInt8](data)
            let datagrams: [CapturedDatagram]
            if Pcap.isPcap(bytes) {
                do {
                    datagrams = try Pcap.datagrams(in: bytes)
                } catch {
                    throw ValidationError("\(path): \(error)")
                }
            } else {
                datagrams = [CapturedDatagram(time: 0, source: "", destination: "", payload: bytes)]
            }
            for datagram in datagrams {
                number += 1
                if !show(datagram, number: number, file: path) { failures += 1 }
            }
        }
        if failures > 0 {
            FileHandle.standardError.write(Data("nearby: \(failures) of \(number) packets did not decode\n".utf8))
            throw ExitCode(1)
        }
    }

    /// Prints one packet; false if it did not decode.
    private func show(_ datagram: CapturedDatagram, number: Int, file: String) -> Bool {
        do {
            let decoded = try Message.decode(datagram.payload)
            if json {
                print(JSONText.object(PacketJSON.packet(decoded, datagram: datagram, number: number, file: file)))
            } else {
                print(PacketText.packet(decoded, datagram: datagram, number: number))
            }
            return true
        } catch {
            if json {
                print(JSONText.object([
                    ("packet", .number(Double(number))), ("file", .string(file)),
                    ("size", .number(Double(datagram.payload.count))), ("error", .string(error.description)),
                ]))
            } else {
                print("packet \(number)  \(datagram.source.isEmpty ? file : datagram.source)  "
                      + "\(datagram.payload.count) bytes  DOES NOT DECODE: \(error)\n")
            }
            return false
        }
    }
}
