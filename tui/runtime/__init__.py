"""The app's machinery below the screens: the watchers and their threads, the collector policy, the terminal
diff, the line filter, and the one home of Textual's private API. Nothing here draws or formats."""
