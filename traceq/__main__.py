from traceq.cli import main

main()
