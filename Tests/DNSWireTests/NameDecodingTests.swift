import DNSWire
import Testing

/// The name reader's paths: a name all in place, labels then a pointer to a name read before,
/// labels then a pointer into the middle of another name, only a pointer, chains of pointers,
/// and more names than a decode remembers. Each must give the same name as reading the labels
/// one by one would.
@Suite("Decoding compressed names")
struct NameDecodingTests {
    @Test("labels then a pointer: to a name read before, and into the middle of one")
    func labelsThenPointer() throws {
        var packet = PacketBytes(flags: 0, questions: 3)
        packet.name("_http", "_tcp", "local")  // 12: read first, remembered
        packet.question()
        packet.label("Box A")
        packet.pointer(to: 12)  // the whole remembered name
        packet.question()
        packet.label("host")
        packet.pointer(to: 23)  // "local", the middle of the first name: not remembered as such
        packet.question()
        let message = try Message(decoding: packet.bytes)
        #expect(message.questions.map(\.name) == [
            "_http._tcp.local.", "Box\\032A._http._tcp.local.", "host.local.",
        ])
        #expect(message.questions.map(\.name.labelCount) == [3, 4, 2])
    }

    /// A question whose name is a chain: a pointer at 12 to "a" (18), a pointer to "b" (24),
    /// a pointer to "c" (30), whose end at 32 the caller writes.
    func chain() -> PacketBytes {
        var packet = PacketBytes(flags: 0, questions: 1)
        packet.pointer(to: 18)  // 12
        packet.question()  // 14..17
        packet.label("a")  // 18
        packet.pointer(to: 24)  // 20
        packet.bytes += [0, 0]  // 22..23
        packet.label("b")  // 24
        packet.pointer(to: 30)  // 26
        packet.bytes += [0, 0]  // 28..29
        packet.label("c")  // 30
        return packet
    }

    @Test("a chain of pointers: pointer, label, pointer, label, pointer, label, root")
    func pointerChain() throws {
        var packet = chain()
        packet.bytes.append(0)  // 32
        let message = try Message(decoding: packet.bytes)
        #expect(message.questions.first?.name == "a.b.c.")
        #expect(message.questions.first?.type == .ptr)
    }

    @Test("a loop back to the second or the third target of a chain is a pointer loop", arguments: [24, 30])
    func loopInChain(backTo target: Int) {
        var packet = chain()
        packet.pointer(to: target)  // 32: back to "b" or "c", both followed before
        let error = #expect(throws: DNSWireError.self) { try Message.decode(packet.bytes) }
        #expect(error?.code == .pointerLoop)
        #expect(error?.offset == 32)
    }

    @Test("more names than one decode remembers: every pointer still finds its name")
    func manyNames() throws {
        // 80 distinct instance names, each pointed at by a later record's owner name and by a
        // PTR: more than a decode keeps at hand, so some pointers lead to names it no longer
        // remembers and are read again from the packet.
        let type = try ServiceType(parsing: "_many._tcp")
        var records: [ResourceRecord] = []
        for index in 0..<80 {
            let instance = try ServiceInstanceName("Instance \(index)", type: type).domainName
            records.append(ResourceRecord(name: type.domainName, data: .ptr(instance), ttl: 4500))
            records.append(ResourceRecord(name: instance, data: .txt(.empty), ttl: 4500, cacheFlush: true))
        }
        let message = Message(header: .response, answers: records)
        let bytes = try message.encoded()
        let decoded = try Message(decoding: bytes)
        #expect(decoded == message)
    }

    @Test("a name that is only a pointer is the name it points at")
    func onlyPointer() throws {
        var packet = PacketBytes(flags: 0, questions: 2)
        packet.name("printer", "local")  // 12
        packet.question()
        packet.pointer(to: 12)
        packet.question()
        let message = try Message(decoding: packet.bytes)
        #expect(message.questions.count == 2)
        #expect(message.questions[0].name == message.questions[1].name)
        #expect(message.questions[1].name.description == "printer.local.")
    }
}
