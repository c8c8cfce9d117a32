import DNSWire
import Foundation
import Testing

/// What `Tools/lab.d/peers/mdns_golden.py` (an independent parser) read from each captured packet.
struct GoldenManifest: Decodable {
    struct Flags: Decodable { var raw: UInt16; var qr: Int; var opcode: Int; var aa: Int; var tc: Int; var rcode: Int }
    struct Counts: Decodable { var questions: Int; var answers: Int; var authorities: Int; var additionals: Int }
    struct Question: Decodable { var name: String; var type: UInt16; var `class`: UInt16; var qu: Bool }
    struct RData: Decodable {
        var address: String?
        var target: String?
        var priority: UInt16?
        var weight: UInt16?
        var port: UInt16?
        var strings: [String]?
    }
    struct Record: Decodable {
        var name: String
        var type: UInt16
        var `class`: UInt16
        var cache_flush: Bool
        var ttl: UInt32
        var rdlength: Int
        var rdata: RData?
    }
    struct File: Decodable {
        var file: String
        var peer: String
        var kind: String
        var id: UInt16
        var flags: Flags
        var counts: Counts
        var questions: [Question]
        var answers: [Record]
        var authorities: [Record]
        var additionals: [Record]
    }
    var files: [File]

    static func load() throws -> GoldenManifest {
        let url = try #require(Bundle.module.url(forResource: "manifest", withExtension: "json", subdirectory: "Fixtures/golden"))
        return try JSONDecoder().decode(GoldenManifest.self, from: Data(contentsOf: url))
    }

    static func bytes(of file: String) throws -> [UInt8] {
        let url = try #require(Bundle.module.url(forResource: file, withExtension: nil, subdirectory: "Fixtures/golden"))
        return [UInt8](try Data(contentsOf: url))
    }
}

@Suite("Golden packets from avahi-daemon and python-zeroconf")
struct GoldenPacketTests {
    static let files: [GoldenManifest.File] = (try? GoldenManifest.load().files) ?? []

    @Test("the fixtures cover both peers and every kind of message")
    func coverage() throws {
        let files = try GoldenManifest.load().files
        let pairs = Set(files.map { "\($0.peer)-\($0.kind)" })
        for peer in ["avahi", "zeroconf"] {
            for kind in ["probe", "announcement", "query", "query-known-answers", "response", "goodbye"] {
                #expect(pairs.contains("\(peer)-\(kind)"), "no \(kind) from \(peer)")
            }
        }
    }

    @Test("each packet decodes to what the independent parser saw, and round-trips", arguments: files)
    func golden(file: GoldenManifest.File) throws {
        let bytes = try GoldenManifest.bytes(of: file.file)
        let decoded = try Message.decode(bytes)
        #expect(decoded.skippedRecords.isEmpty)
        let message = decoded.message

        #expect(message.header.id == file.id)
        #expect(message.header.flags == file.flags.raw)
        #expect(message.header.isResponse == (file.flags.qr == 1))
        #expect(message.header.isAuthoritative == (file.flags.aa == 1))
        #expect(message.header.isTruncated == (file.flags.tc == 1))
        #expect(Int(message.header.opcode) == file.flags.opcode)
        #expect(Int(message.header.responseCode) == file.flags.rcode)

        #expect(message.questions.count == file.counts.questions)
        #expect(message.answers.count == file.counts.answers)
        #expect(message.authorities.count == file.counts.authorities)
        #expect(message.additionals.count == file.counts.additionals)

        for (ours, theirs) in zip(message.questions, file.questions) {
            #expect(ours.name.description == theirs.name)
            #expect(ours.type.rawValue == theirs.type)
            #expect(ours.class.rawValue == theirs.class)
            #expect(ours.unicastResponse == theirs.qu)
        }
        let sections = [
            (message.answers, file.answers), (message.authorities, file.authorities),
            (message.additionals, file.additionals),
        ]
        for (ours, theirs) in sections {
            for (record, expected) in zip(ours, theirs) { try check(record, against: expected) }
        }

        // Re-encode (with our own compression) and decode again: the same value.
        let again = try Message.decode(try message.encoded())
        #expect(again.message == message)
        #expect(again.skippedRecords.isEmpty)
        // Split under the default packet size as a responder would send it.
        let packets = try message.encodedPackets()
        #expect(packets.count == 1)
        #expect(packets[0].count <= bytes.count + 16)
    }

    private func check(_ record: ResourceRecord, against expected: GoldenManifest.Record) throws {
        #expect(record.name.description == expected.name)
        #expect(record.type.rawValue == expected.type)
        #expect(record.class.rawValue == expected.class)
        #expect(record.cacheFlush == expected.cache_flush)
        #expect(record.ttl == expected.ttl)
        let rdata = expected.rdata
        switch record.data {
        case .a(let address):
            #expect(address.description == rdata?.address)
        case .aaaa(let address):
            #expect(address.description == rdata?.address)
        case .ptr(let target):
            #expect(target.description == rdata?.target)
        case .srv(let srv):
            #expect(srv.target.description == rdata?.target)
            #expect(srv.port == rdata?.port)
            #expect(srv.priority == rdata?.priority)
            #expect(srv.weight == rdata?.weight)
        case .txt(let txt):
            #expect(txt.rdata.count == expected.rdlength)
            #expect(txt.strings.map { String(decoding: $0, as: UTF8.self) } == (rdata?.strings ?? []))
        default:
            break
        }
    }

    @Test("TXT published by avahi and by python-zeroconf reads as discovery info")
    func discoveryInfoFromPeers() throws {
        for peer in ["avahi", "zeroconf"] {
            let file = try #require(Self.files.first { $0.peer == peer && $0.kind == "announcement" && $0.answers.contains { $0.type == 16 } })
            let message = try Message(decoding: try GoldenManifest.bytes(of: file.file))
            let txt = try #require(message.answers.compactMap { record -> TXTData? in
                if case .txt(let txt) = record.data { return txt } else { return nil }
            }.first)
            let info = DiscoveryInfo(txt)
            #expect(info.string(for: "version") == "0.2.2", "\(peer)")
            #expect(info.string(for: "mode") == "bridge", "\(peer)")
            #expect(info["flag"] == .flag, "\(peer)")
            #expect(info.rdata == txt.rdata, "\(peer)")
        }
    }
}

extension GoldenManifest.File: CustomTestStringConvertible {
    var testDescription: String { file }
}
