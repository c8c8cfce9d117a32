import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import PeerTrust

struct ReceiveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receive",
        abstract: "Take files that peers send (nearby send) into a folder, advertised so that senders find this one.",
        discussion: """
            Short for `nearby serve NAME TYPE PORT --receive FOLDER`: advertises NAME (default: \
            this machine's name) as TYPE (default _openagents._tcp) on PORT (default: any free \
            one), admits peers by TRUST (default: the pinned ones), and saves what they send. \
            Any option of serve goes after these (nearby serve --help): --accept ask to be asked \
            about peers that are not trusted, --pairing, --json, --no-advertise, --domain, …

            A file is written to NAME.SENDER.part (SENDER: the start of the sender's peer ID) and renamed to NAME once its size and SHA-256 match \
            the sender's; a name taken already gets a number ("report (2).pdf"). A transfer cut \
            short keeps its partial file, and the same sender's `nearby send --resume` continues it. \
            Names with "/", "..", control characters or a leading dot are declined, and so are \
            files over --max-size or the free space. Runs until SIGINT or SIGTERM.

            Examples:
              nearby receive --dir ~/Incoming
              nearby receive --dir ~/Incoming --accept ask
              nearby receive --dir /srv/drop --port 9099 --max-size 10000000000 --json

            Exit status: 0 stopped by SIGINT or SIGTERM; 1 a failure at run time, such as a folder that cannot be written, said on stderr; 2 bad input.
            """)

    @Option(help: ArgumentHelp("The folder files go into (it must exist).", valueName: "folder"))
    var dir: String = "."
    @Option(help: ArgumentHelp("Instance name to advertise (default: this machine's name).", valueName: "name"))
    var name: String?
    @Option(help: ArgumentHelp("Service type to advertise.", valueName: "type"))
    var type: String = "_openagents._tcp"
    @Option(help: ArgumentHelp("TCP port to listen on (0: any free port, printed when listening).", valueName: "port"),
            transform: NumberInput.integer("--port", 0...65535, use: "1-65535, or 0 for any free port"))
    var port: Int = 0
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Options of serve (see nearby serve --help).", valueName: "serve options"))
    var serveOptions: [String] = []

    /// The serve command this stands for.
    func serve() throws -> Serve {
        try Serve.parse([name ?? PeerIdentity.defaultDisplayName(), type, String(port), "--receive", dir] + serveOptions)
    }

    func validate() throws {
        let serve = try serve()
        try serve.validate()
    }

    func run() async throws {
        let serve = try serve()
        try await serve.run()
    }
}
